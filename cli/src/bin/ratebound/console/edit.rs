//! FILE and what is done to it: read once, written back only when valid
//! (as JSON, or YAML for a YAML file), after the page has shown what
//! changes and which routes' counters the save resets; the WasmPlugin
//! manifest of the configuration; the OpenAPI inventories of routes.

use crate::args;
use ratebound::config::{ConfigError, MAX_CONFIG_BYTES};
use ratebound::reading::{audience, structure, words};
use ratebound_cli::input::{self, Format};
use ratebound_cli::{openapi, source};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// An operation of an inventory: its title and the operation object a
/// route's `operations` takes (as `ratebound openapi` writes it).
type Inventory = Vec<Value>;

pub struct State {
    file: String,
    format: Format,
    /// FILE as last read or written: a save refuses when FILE changed
    /// on disk since.
    text: String,
    /// Whether FILE existed when read (or has been saved since): a
    /// console started on a file that does not exist starts from an empty
    /// configuration, and its first valid save creates FILE.
    exists: bool,
    nodes: Option<u32>,
    url: Option<String>,
    /// Inventories given with --openapi ROUTE=SPEC: (route, spec, operations).
    inventories: Vec<(String, String, Inventory)>,
}

impl State {
    pub fn load(c: &args::Console) -> Result<State, String> {
        let exists = !matches!(
            std::fs::symlink_metadata(&c.file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        );
        let bytes = if exists {
            read_file(&c.file)?
        } else {
            Vec::new()
        };
        let format = input::detect(&c.file, &bytes);
        if exists {
            let found =
                source::find(&bytes, format).map_err(|nf| format!("{}: {}", c.file, nf.error))?;
            match found.documents.as_slice() {
                [one] if one.holder.is_none() => {}
                _ => {
                    return Err(format!(
                        "{}: the console edits a file holding one configuration (not a WasmPlugin \
                         manifest or a stream): its page exports the manifest",
                        c.file
                    ))
                }
            }
        }
        let mut inventories = Vec::new();
        for o in &c.openapi {
            let Some((route, spec)) = o.split_once('=') else {
                return Err(format!("--openapi {o}: write ROUTE=SPEC"));
            };
            let bytes = input::read_capped(spec, openapi::MAX_DOCUMENT_BYTES)
                .map_err(|e| format!("cannot read {spec}: {e}"))?;
            let ops = inventory(&bytes, spec).map_err(|e| e.to_string())?;
            inventories.push((route.to_string(), spec.to_string(), ops));
        }
        Ok(State {
            file: c.file.clone(),
            format,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            exists,
            nodes: c.nodes,
            url: c.url.clone(),
            inventories,
        })
    }

    /// What the page starts from: FILE's configuration as JSON, the nodes,
    /// the admins and the inventories given on the command line.
    pub fn describe(&self, admins: &[String]) -> Value {
        let config = match self.exists {
            true => config_value(&self.text, self.format).unwrap_or(Value::Null),
            false => Value::Null,
        };
        json!({
            "file": self.file,
            "format": format_name(self.format),
            "exists": self.exists,
            "note": self.note(),
            "config": config,
            "nodes": self.nodes,
            "admins": admins,
            "inventories": self.inventories.iter().map(|(route, spec, ops)| json!({
                "route": route, "spec": spec, "operations": ops,
            })).collect::<Vec<_>>(),
        })
    }

    /// What the page says of FILE above the routes: that it does not exist
    /// yet, and what will create it.
    pub fn note(&self) -> Option<String> {
        (!self.exists).then(|| {
            format!(
                "{} does not exist yet: this is an empty configuration. Add a route and its \
                 bounds; the first valid save creates {} ({}).",
                self.file,
                self.file,
                format_name(self.format).to_uppercase()
            )
        })
    }

    /// What a save would write: the changes line by line and the routes
    /// whose counters it resets; 422 with the errors when invalid.
    pub fn preview(&self, request: &Value) -> (u16, Value) {
        match self.prepare(request) {
            Err(answer) => answer,
            Ok(p) => (
                200,
                json!({
                    "file": self.file,
                    "format": format_name(self.format),
                    "unchanged": p.text == self.text,
                    "changes": diff(&self.text, &p.text),
                    "resets": p.resets,
                }),
            ),
        }
    }

    /// Writes FILE when the configuration is valid and FILE has not changed
    /// on disk since it was read (or last saved).
    pub fn save(&mut self, request: &Value) -> (u16, Value) {
        let p = match self.prepare(request) {
            Err(answer) => return answer,
            Ok(p) => p,
        };
        let changed = || {
            (
                409,
                json!({"error": format!("{} changed on disk since it was read: reload the page to edit what it holds now", self.file)}),
            )
        };
        let written = if self.exists {
            match read_file(&self.file) {
                Ok(now) if String::from_utf8_lossy(&now) == self.text => {}
                Ok(_) => return changed(),
                Err(e) => return (500, json!({ "error": e })),
            }
            std::fs::write(&self.file, p.text.as_bytes())
        } else {
            // Created only now, and only if nobody created it meanwhile.
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&self.file)
            {
                Ok(mut f) => std::io::Write::write_all(&mut f, p.text.as_bytes()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return changed(),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = written {
            return (
                500,
                json!({"error": format!("cannot write {}: {e}", self.file)}),
            );
        }
        self.exists = true;
        self.text = p.text;
        (
            200,
            json!({"written": self.file, "bytes": self.text.len(), "resets": p.resets}),
        )
    }

    /// The Istio WasmPlugin manifest carrying the configuration.
    pub fn export(&self, request: &Value) -> (u16, Value) {
        let config = match valid_config(request) {
            Ok(c) => c,
            Err(answer) => return answer,
        };
        let url = self.url.clone().unwrap_or_else(|| {
            format!(
                "oci://registry.example.com/ratebound:{}",
                env!("CARGO_PKG_VERSION")
            )
        });
        let manifest = json!({
            "apiVersion": "extensions.istio.io/v1alpha1",
            "kind": "WasmPlugin",
            "metadata": {"name": "ratebound", "namespace": "istio-system"},
            "spec": {
                "selector": {"matchLabels": {"istio": "ingressgateway"}},
                "url": url,
                "phase": "AUTHZ",
                "failStrategy": "FAIL_RELOAD",
                "pluginConfig": config,
            },
        });
        match serde_saphyr::to_string(&manifest) {
            Ok(yaml) => (
                200,
                json!({
                    "name": "wasmplugin.yaml",
                    "manifest": format!(
                        "# Exported by `ratebound console` from {}. Set spec.url to where the module\n\
                         # is published and spec.sha256 to its digest (docs/istio.md).\n{yaml}",
                        self.file
                    ),
                }),
            ),
            Err(e) => (500, json!({"error": format!("cannot write YAML: {e}")})),
        }
    }

    /// An OpenAPI document read on the page (`{"name", "text"}`): its
    /// operations, each as a route's `operations` takes it.
    pub fn openapi(&self, request: &Value) -> (u16, Value) {
        let (Some(name), Some(text)) = (
            request.get("name").and_then(Value::as_str),
            request.get("text").and_then(Value::as_str),
        ) else {
            return (
                400,
                json!({"error": "send {\"name\": FILE NAME, \"text\": THE DOCUMENT}"}),
            );
        };
        match inventory(text.as_bytes(), name) {
            Ok(ops) => (200, json!({ "spec": name, "operations": ops })),
            Err(e) => (422, json!({ "errors": [error_json(&e)] })),
        }
    }

    /// The text a save would write, and the routes it resets; or the answer
    /// that refuses it.
    fn prepare(&self, request: &Value) -> Result<Prepared, (u16, Value)> {
        if request.get("file").is_some() {
            // Only FILE is ever written: a request cannot name another.
            return Err((
                400,
                json!({"error": "a save writes FILE, the file the console was started on; no other may be named"}),
            ));
        }
        let config = valid_config(request)?;
        let before = config_value(&self.text, self.format).unwrap_or(Value::Null);
        let text = match self.format {
            Format::Json => {
                let mut t = serde_json::to_string_pretty(&config).unwrap_or_default();
                t.push('\n');
                t
            }
            // Comments, order and quoting kept: the changes applied to
            // FILE's text (whole when they cannot be).
            Format::Yaml => match super::keep::edit(&self.text, &before, &config, |t| {
                config_value(t, Format::Yaml)
            }) {
                Some(t) => t,
                None => serde_saphyr::to_string(&config)
                    .map_err(|e| (500, json!({"error": format!("cannot write YAML: {e}")})))?,
            },
        };
        if text.len() > MAX_CONFIG_BYTES {
            return Err((
                422,
                json!({"errors": [{"path": "$", "message": format!("the configuration would be {} bytes; at most {MAX_CONFIG_BYTES} are accepted", text.len())}]}),
            ));
        }
        Ok(Prepared {
            resets: resets(&before, &config),
            text,
        })
    }
}

struct Prepared {
    text: String,
    resets: Vec<String>,
}

fn read_file(file: &str) -> Result<Vec<u8>, String> {
    let bytes = input::read(file).map_err(|e| format!("cannot read {file}: {e}"))?;
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(format!(
            "{file} is larger than {MAX_CONFIG_BYTES} bytes, the most a configuration may be"
        ));
    }
    Ok(bytes)
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Json => "json",
        Format::Yaml => "yaml",
    }
}

/// FILE's configuration as a JSON value (YAML turned into JSON as `check`
/// turns it).
fn config_value(text: &str, format: Format) -> Option<Value> {
    let json = input::to_json(text.as_bytes(), format).ok()?;
    serde_json::from_slice(&json).ok()
}

fn error_json(e: &ConfigError) -> Value {
    json!({"path": e.path, "message": e.message, "text": e.to_string()})
}

/// The request's `config`, when `check` finds it valid; else 422 with
/// every error, in `check`'s words.
fn valid_config(request: &Value) -> Result<Value, (u16, Value)> {
    let Some(config) = request.get("config") else {
        return Err((
            400,
            json!({"error": "send {\"config\": THE CONFIGURATION}"}),
        ));
    };
    // The page sends "applies to" as typed ("partner and trial"): read
    // into its JSON, as the page's core reads it, before anything else.
    let mut config = config.clone();
    let word_errors = audience::normalize(&mut config);
    let bytes = serde_json::to_vec(&config).unwrap_or_default();
    match structure::parse(&bytes) {
        Ok(_) if word_errors.is_empty() => Ok(config),
        Ok(_) => Err((
            422,
            json!({"errors": word_errors.iter().map(error_json).collect::<Vec<_>>()}),
        )),
        Err(errors) => Err((
            422,
            json!({"errors": errors.iter().chain(&word_errors).map(error_json).collect::<Vec<_>>()}),
        )),
    }
}

/// The routes whose counters a save resets: every route whose definition
/// changes (a route saved anew starts its counters from zero), added or
/// removed; every route when the instance changes (it prefixes every key).
fn resets(before: &Value, after: &Value) -> Vec<String> {
    let routes = |v: &Value| -> BTreeMap<String, Value> {
        v.get("routes")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .filter_map(|r| Some((r.get("name")?.as_str()?.to_string(), r.clone())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (old, new) = (routes(before), routes(after));
    let instance_changed = before.get("instance") != after.get("instance");
    let mut names: Vec<String> = Vec::new();
    for (name, r) in &new {
        if instance_changed || old.get(name) != Some(r) {
            names.push(name.clone());
        }
    }
    for name in old.keys() {
        if !new.contains_key(name) {
            names.push(name.clone());
        }
    }
    names
}

/// The lines of `before` and `after` as kept (" "), removed ("-") and
/// added ("+"): a longest-common-subsequence diff, plain removal and
/// addition past 2,000 lines (the table is lines² counters).
fn diff(before: &str, after: &str) -> Vec<Value> {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let line = |op: &str, l: &str| json!([op, l]);
    if a.len() > 2000 || b.len() > 2000 {
        return a
            .iter()
            .map(|l| line("-", l))
            .chain(b.iter().map(|l| line("+", l)))
            .collect();
    }
    // lcs[i][j]: the common lines of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(line(" ", a[i]));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(line("-", a[i]));
            i += 1;
        } else {
            out.push(line("+", b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| line("-", l)));
    out.extend(b[j..].iter().map(|l| line("+", l)));
    out
}

/// The operations of an OpenAPI document, each as a route's `operations`
/// takes it, written by `ratebound openapi`'s own code with one bound per
/// client address to start from (edited on the page).
fn inventory(bytes: &[u8], label: &str) -> Result<Inventory, ConfigError> {
    let doc = openapi::read_document(bytes, input::detect(label, bytes), label)?;
    let start = json!([{"name": "per_address", "per": "address", "limit": 10, "window": "PT1M"}]);
    let request = |servers| openapi::OpenapiRequest {
        route: "inventory".into(),
        match_prefix: None,
        servers,
        spec_label: label.into(),
        bounds_label: "the page".into(),
    };
    let mut out = Vec::new();
    for op in &doc.operations {
        let key = format!("{} {}", op.method, op.path);
        // Behind its servers' path when it has one (the path Envoy sees,
        // as `ratebound openapi --servers` writes it), else as written.
        let written = [true, false].into_iter().find_map(|servers| {
            openapi::generate(
                &doc,
                &[(key.clone(), start.clone())],
                None,
                &request(servers),
            )
            .ok()
            .and_then(|g| g.json.pointer("/routes/0/operations/0").cloned())
        });
        let mut entry = Map::new();
        match written {
            Some(o) => {
                let path = o.get("path").and_then(Value::as_str).unwrap_or(&op.path);
                entry.insert(
                    "title".into(),
                    json!(words::operation(
                        &op.method,
                        path,
                        op.operation_id.as_deref()
                    )),
                );
                entry.insert("operation".into(), o);
            }
            None => {
                entry.insert("title".into(), json!(op.title()));
                entry.insert(
                    "error".into(),
                    json!("cannot be written as a route's operation (ratebound openapi says why)"),
                );
            }
        }
        out.push(Value::Object(entry));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_keeps_common_lines_and_marks_the_rest() {
        let d = diff("a\nb\nc\n", "a\nB\nc\nd\n");
        let ops: Vec<String> = d
            .iter()
            .map(|v| format!("{}{}", v[0].as_str().unwrap(), v[1].as_str().unwrap()))
            .collect();
        assert_eq!(ops, [" a", "-b", "+B", " c", "+d"]);
    }

    #[test]
    fn a_save_resets_the_routes_it_changes_adds_or_removes() {
        let before = json!({"routes": [
            {"name": "a", "bounds": [{"per": "route", "limit": 1, "window": "PT1M"}]},
            {"name": "b"}, {"name": "c"}]});
        let after = json!({"routes": [
            {"name": "a", "bounds": [{"per": "route", "limit": 2, "window": "PT1M"}]},
            {"name": "b"}, {"name": "d"}]});
        assert_eq!(resets(&before, &after), ["a", "d", "c"]);
        assert!(resets(&after, &after).is_empty());
        // The instance prefixes every key: every route starts anew.
        let mut renamed = after.clone();
        renamed["instance"] = json!("other");
        assert_eq!(resets(&after, &renamed), ["a", "b", "d"]);
    }

    #[test]
    fn only_a_valid_configuration_is_prepared_and_no_other_file_can_be_named() {
        let state = State {
            file: "x.json".into(),
            format: Format::Json,
            text: "{}".into(),
            exists: true,
            nodes: None,
            url: None,
            inventories: Vec::new(),
        };
        let ok = json!({"config": {"routes": [{"name": "a", "bounds": [
            {"per": "address", "limit": 5, "window": "PT1M"}]}]}});
        let (status, answer) = state.preview(&ok);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["resets"], json!(["a"]));
        let mut named = ok.clone();
        named["file"] = json!("/etc/passwd");
        assert_eq!(state.preview(&named).0, 400);
        let bad = json!({"config": {"routes": [{"name": "a", "bounds": [
            {"per": "address", "limit": 5, "window": "1m"}]}]}});
        let (status, answer) = state.preview(&bad);
        assert_eq!(status, 422);
        assert_eq!(answer["errors"][0]["path"], "$.routes[0].bounds[0].window");
        // "applies to" as typed is saved as the configuration's JSON.
        let words = json!({"config": {"identity": {"header": {"user": "x-user", "roles": "x-roles"}},
            "routes": [{"name": "a", "bounds": [
            {"per": "user", "limit": 1000, "window": "PT1M", "applies_to": "partner"},
            {"per": "user", "limit": 60, "window": "PT1M", "applies_to": "partnr"}]}]}});
        let (status, answer) = state.preview(&words);
        assert_eq!(status, 422);
        assert_eq!(
            answer["errors"][0]["path"],
            "$.routes[0].bounds[1].applies_to"
        );
        let message = answer["errors"][0]["message"].as_str().unwrap();
        assert!(
            message.starts_with("unknown word \"partnr\": write role:partner"),
            "{message}"
        );
        let mut fixed = words.clone();
        fixed["config"]["routes"][0]["bounds"][1]["applies_to"] = json!("for trial");
        let p = state.prepare(&fixed).unwrap();
        let saved: Value = serde_json::from_str(&p.text).unwrap();
        assert_eq!(
            saved["routes"][0]["bounds"][1]["applies_to"],
            json!({"roles": ["trial"]})
        );
    }

    #[test]
    fn a_file_that_does_not_exist_is_created_by_the_first_valid_save_only() {
        let dir = std::env::temp_dir().join(format!("ratebound-console-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("new.yaml");
        let _ = std::fs::remove_file(&file);
        let args = args::Console {
            file: file.to_string_lossy().into_owned(),
            admin: Vec::new(),
            nodes: None,
            listen: "127.0.0.1:0".parse().unwrap(),
            openapi: Vec::new(),
            url: None,
        };
        let mut state = State::load(&args).unwrap();
        let described = state.describe(&[]);
        assert_eq!(described["exists"], json!(false));
        assert_eq!(described["config"], Value::Null);
        assert!(described["note"]
            .as_str()
            .unwrap()
            .contains("does not exist yet"));
        let bad = json!({"config": {"routes": [{"name": "a", "bounds": [
            {"per": "address", "limit": 5, "window": "1m"}]}]}});
        assert_eq!(state.save(&bad).0, 422);
        assert!(!file.exists(), "an invalid save creates nothing");
        let ok = json!({"config": {"routes": [{"name": "a", "bounds": [
            {"per": "address", "limit": 5, "window": "PT1M"}]}]}});
        let (status, preview) = state.preview(&ok);
        assert_eq!(status, 200, "{preview}");
        assert!(preview["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l[0] == "+"));
        assert!(!file.exists(), "a preview creates nothing");
        let (status, answer) = state.save(&ok);
        assert_eq!(status, 200, "{answer}");
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(written.contains("window: PT1M"), "{written}");
        assert_eq!(state.describe(&[])["note"], Value::Null);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
