//! `ratebound check`: every error of every configuration in the files,
//! directories and streams given, where it is; or the warnings, notes and
//! counts of a valid one; then what is wrong across them. The exit status
//! is the worst of all.

use crate::args::{Check, Format};
use crate::load::{
    document_json, error_json, errors_text, name, not_found_json, not_found_text, parse_all,
    Checked,
};
use crate::output::{err, out, plural, pretty, INVALID, USAGE, VALID};
use ratebound::config::plan::Plan;
use ratebound::config::{Config, ConfigError, ErrorKind};
use ratebound::reading::{sharing, warnings, words, Severity};
use ratebound_cli::source::Document;
use ratebound_cli::stream::{cross_check, EnvoyFilter, Plugin, Workloads};
use ratebound_cli::{input, rls_config};
use serde_json::{json, Value};
use std::path::Path;

/// The version of `--format json`'s shape: it changes only when a field
/// changes meaning or goes away.
const JSON_VERSION: u32 = 1;

/// What one file came to.
struct Outcome {
    text: String,
    json: Value,
    code: u8,
    /// Its valid WasmPlugin configurations (name, object, workloads), for
    /// the checks across the run.
    plugins: Vec<(String, String, Workloads, Config)>,
    envoy_filters: Vec<EnvoyFilter>,
}

/// What every file is checked with.
struct Settings<'a> {
    strict: bool,
    nodes: Option<u32>,
    /// The rate-limit service's configuration: its path and text.
    rls: Option<(&'a str, String)>,
}

/// A file to check, or why an argument gives none.
enum Input {
    File(String),
    /// Found in a directory but not checked (kustomize's own file).
    Skipped(String, String),
    /// A directory without a file to check, or one that cannot be read.
    Unreadable(String, String),
}

pub fn run(c: &Check) -> u8 {
    // The rate-limit service's configuration, read once for every document.
    let rls = match c.rls_config.as_deref() {
        None => None,
        Some(path) => match input::read(path) {
            Ok(b) => Some((path, String::from_utf8_lossy(&b).into_owned())),
            Err(e) => {
                err(&format!("ratebound: cannot read {path}: {e}\n"));
                return USAGE;
            }
        },
    };
    let settings = Settings {
        strict: c.strict,
        nodes: c.nodes,
        rls,
    };
    let mut inputs = Vec::new();
    for f in &c.files {
        expand(f, c.recursive, true, &mut inputs);
    }
    // A file named twice (`deploy/ deploy/a.yaml`) is checked once.
    let mut seen = std::collections::HashSet::new();
    inputs.retain(|i| match i {
        Input::File(f) if f != "-" => {
            seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.into()))
        }
        _ => true,
    });
    let mut code = VALID;
    let mut text = String::new();
    let mut files = Vec::new();
    let mut plugins = Vec::new();
    let mut envoy_filters = Vec::new();
    let (mut passed, mut failed) = (0usize, 0usize);
    for i in &inputs {
        let o = match i {
            Input::File(f) => match input::read(f) {
                Ok(bytes) => match check_file(f, &bytes, &settings) {
                    Ok(o) => o,
                    Err(status) => return status,
                },
                Err(e) => unreadable(f, &format!("cannot read {f}: {e}"), c),
            },
            Input::Unreadable(f, why) => unreadable(f, why, c),
            Input::Skipped(f, why) => Outcome {
                text: format!("note: {f}: {why}\n"),
                json: json!({"file": f, "valid": true, "strict": c.strict, "exit": VALID,
                    "errors": [], "documents": [], "notes": [why]}),
                code: VALID,
                plugins: Vec::new(),
                envoy_filters: Vec::new(),
            },
        };
        code = code.max(o.code);
        if o.code == VALID {
            passed += 1;
        } else {
            failed += 1;
        }
        text.push_str(&o.text);
        files.push(o.json);
        plugins.extend(o.plugins);
        envoy_filters.extend(o.envoy_filters);
    }
    let across = cross_check(
        &plugins
            .iter()
            .map(|(name, object, workloads, config)| Plugin {
                name,
                object,
                workloads,
                config,
            })
            .collect::<Vec<_>>(),
        &envoy_filters,
    );
    for w in &across {
        text.push_str(&format!("{w}\n"));
    }
    let fails_across = c.strict && !across.is_empty();
    if fails_across {
        text.push_str("failing on warnings across the files (--strict)\n");
        code = code.max(INVALID);
    }
    if inputs.len() > 1 {
        text.push_str(&format!(
            "{}: {passed} pass, {failed} fail; {} across them\n",
            plural(inputs.len(), "file"),
            plural(across.len(), "warning")
        ));
    }
    match c.format {
        Format::Text => out(&text),
        Format::Json => out(&pretty(&json!({
            "version": JSON_VERSION,
            "valid": files.iter().all(|f| f["valid"] == true),
            "strict": c.strict,
            "exit": code,
            "files": files,
            "cross_checks": across,
        }))),
    }
    code
}

/// The files an argument names: itself, or a directory's `*.json`,
/// `*.yaml` and `*.yml` (sorted; with `recursive`, its subdirectories' too,
/// hidden files and directories left out, symbolic links to directories
/// not followed).
fn expand(arg: &str, recursive: bool, named: bool, inputs: &mut Vec<Input>) {
    let path = Path::new(arg);
    if arg == "-" || !path.is_dir() {
        inputs.push(Input::File(arg.to_string()));
        return;
    }
    let entries = match std::fs::read_dir(path) {
        Ok(e) => e,
        Err(e) => {
            inputs.push(Input::Unreadable(
                arg.to_string(),
                format!("cannot read {arg}: {e}"),
            ));
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    let before = inputs.len();
    for p in entries {
        let shown = p.to_string_lossy().into_owned();
        let file_name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let file_name = file_name.unwrap_or_default();
        if file_name.starts_with('.') {
            continue;
        }
        let real_dir = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir());
        if real_dir {
            if recursive {
                expand(&shown, true, false, inputs);
            }
            continue;
        }
        let ext = p
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if !matches!(ext.as_deref(), Some("json" | "yaml" | "yml")) || p.is_dir() {
            continue;
        }
        if matches!(
            file_name.as_str(),
            "kustomization.yaml" | "kustomization.yml" | "Kustomization"
        ) {
            inputs.push(Input::Skipped(
                shown,
                "skipped, kustomize's own file (check what it builds: `kustomize build DIR | ratebound check -`)".into(),
            ));
            continue;
        }
        inputs.push(Input::File(shown));
    }
    if named && inputs.len() == before {
        let hint = if recursive {
            ""
        } else {
            " (-R for its subdirectories)"
        };
        inputs.push(Input::Unreadable(
            arg.to_string(),
            format!("no .json, .yaml or .yml file in {arg}{hint}"),
        ));
    }
}

/// A file that cannot be read: said on stderr as text, in the JSON as an
/// error of the file (exit 2).
fn unreadable(file: &str, why: &str, c: &Check) -> Outcome {
    if c.format == Format::Text {
        err(&format!("ratebound: {why}\n"));
    }
    let e = ConfigError {
        path: "$".into(),
        kind: ErrorKind::Text,
        message: why.to_string(),
    };
    Outcome {
        text: String::new(),
        json: json!({"file": file, "valid": false, "strict": c.strict, "exit": USAGE,
            "errors": [error_json(&e, None)], "documents": [], "notes": []}),
        code: USAGE,
        plugins: Vec::new(),
        envoy_filters: Vec::new(),
    }
}

/// One file: its configurations' errors, or their warnings and counts.
/// `Err` is the status to stop with (the --rls-config file is wrong).
fn check_file(file: &str, bytes: &[u8], s: &Settings) -> Result<Outcome, u8> {
    let (text, found) = parse_all(file, bytes);
    let (checked, notes, filters) = match found {
        Err(nf) => {
            let mut json = not_found_json(file, &nf);
            if let Some(m) = json.as_object_mut() {
                m.insert("strict".into(), json!(s.strict));
                m.insert("exit".into(), json!(INVALID));
            }
            return Ok(Outcome {
                text: not_found_text(file, &text, &nf),
                json,
                code: INVALID,
                plugins: Vec::new(),
                envoy_filters: Vec::new(),
            });
        }
        Ok(r) => r,
    };
    let mut code = VALID;
    let mut out: String = notes
        .iter()
        .map(|n| format!("note: {file}: {n}\n"))
        .collect();
    if checked.is_empty() {
        out.push_str(&format!(
            "{file}: nothing to check (no WasmPlugin among its objects)\n"
        ));
    }
    let mut docs = Vec::new();
    let mut plugins = Vec::new();
    for c in &checked {
        let (yaml11_text, yaml11_json) = yaml11_warnings(file, &c.doc);
        out.push_str(&yaml11_text);
        let config = match &c.result {
            Err(errors) => {
                code = INVALID;
                out.push_str(&errors_text(file, &text, &c.doc, errors));
                docs.push(with_warnings(
                    document_json(file, c, &[], None),
                    yaml11_json,
                ));
                continue;
            }
            Ok(config) => config,
        };
        let (t, d, failed) = valid_document(file, c, config, yaml11_json, s)?;
        out.push_str(&t);
        docs.push(d);
        if failed {
            code = INVALID;
        }
        if let (Some(w), Some(object)) = (&c.doc.workloads, &c.doc.holder) {
            plugins.push((
                name(file, &c.doc),
                object.clone(),
                w.clone(),
                config.clone(),
            ));
        }
    }
    let json = json!({
        "file": file,
        "valid": checked.iter().all(|c| c.result.is_ok()),
        "strict": s.strict,
        "exit": code,
        "errors": [],
        "documents": docs,
        "notes": notes,
    });
    let envoy_filters = filters
        .into_iter()
        .map(|f| EnvoyFilter {
            name: format!("{file} ({})", f.name),
            clusters: f.clusters,
        })
        .collect();
    Ok(Outcome {
        text: out,
        json,
        code,
        plugins,
        envoy_filters,
    })
}

/// The scalars kubectl reads otherwise that are only warned about (a
/// boolean word), as text and as JSON warnings.
fn yaml11_warnings(file: &str, doc: &Document) -> (String, Vec<Value>) {
    let mut text = String::new();
    let mut json = Vec::new();
    for f in doc.yaml11.iter().filter(|f| !f.error) {
        text.push_str(&format!("warning[yaml-1.1]: {}: {}\n", f.path, f.message));
        let at = doc.position(&f.path, false);
        if let Some(at) = at {
            text.push_str(&format!("  --> {file}:{}:{}\n", at.line, at.column));
        }
        json.push(json!({
            "code": "yaml-1.1",
            "level": "warning",
            "path": f.path,
            "message": f.message,
            "line": at.map(|p| p.line),
            "column": at.map(|p| p.column),
        }));
    }
    (text, json)
}

fn with_warnings(mut doc: Value, more: Vec<Value>) -> Value {
    if let Some(Value::Array(ws)) = doc.get_mut("warnings") {
        ws.extend(more);
    }
    doc
}

/// A valid configuration's warnings, notes and counts: text, JSON and
/// whether it fails (--strict with warnings).
fn valid_document(
    file: &str,
    c: &Checked,
    config: &Config,
    yaml11_json: Vec<Value>,
    s: &Settings,
) -> Result<(String, Value, bool), u8> {
    let mut out = String::new();
    let label = name(file, &c.doc);
    let plan = Plan::compile(config);
    let ws = warnings(&plan, s.nodes);
    let mut warned = ws.iter().filter(|w| w.level == Severity::Warning).count() + yaml11_json.len();
    for w in &ws {
        out.push_str(&format!("{w}\n"));
        if let Some(at) = c.doc.position(&w.path, false) {
            out.push_str(&format!("  --> {file}:{}:{}\n", at.line, at.column));
        }
    }
    let mut disagreements = Vec::new();
    if let Some((path, rls)) = &s.rls {
        match rls_config::compare(config, rls) {
            Ok(ds) => {
                warned += ds.len();
                for d in ds {
                    out.push_str(&format!("warning: {path}: {d}\n"));
                    disagreements.push(d);
                }
            }
            Err(e) => {
                err(&format!("ratebound: {path}: {e}\n"));
                return Err(USAGE);
            }
        }
    }
    let noted = ws.iter().filter(|w| w.level != Severity::Warning).count();
    let bounds: usize = config.routes.iter().map(|r| r.bounds.len()).sum();
    let operations: usize = config.routes.iter().map(|r| r.operations.len()).sum();
    let ops_text = if operations == 0 {
        String::new()
    } else {
        format!(", {}", plural(operations, "operation"))
    };
    let (tables, singles) = ratebound::config::bound_kinds(config);
    let keys = ratebound::count::budget::keys_of(tables, singles);
    out.push_str(&format!(
        "{label}: {} of the {} shared-data keys one configuration may use \
         ({} keyed per caller, {} keys each; {} per route, 1 each)\n",
        words::number(keys),
        words::number(ratebound::count::budget::CONFIG_KEYS),
        plural(tables, "bound"),
        words::number(ratebound::count::budget::TABLE_KEYS),
        plural(singles, "bound"),
    ));
    // Bounds on one key that share an entry: one write a request for them all.
    let mut shared = Vec::new();
    for r in &plan.routes {
        for lane in sharing::lanes(r) {
            out.push_str(&format!("{label}: route {:?}: {lane}\n", r.name));
            shared.push(json!({"route": r.name, "words": lane}));
        }
    }
    out.push_str(&format!(
        "{label}: valid ({}, {}{ops_text}), {}, {}\n",
        plural(config.routes.len(), "route"),
        plural(bounds, "bound"),
        plural(warned, "warning"),
        plural(noted, "note"),
    ));
    let failed = s.strict && warned > 0;
    if failed {
        out.push_str(&format!("{label}: failing on warnings (--strict)\n"));
    }
    let mut d = document_json(
        file,
        c,
        &ws,
        Some(json!({
            "routes": config.routes.len(),
            "bounds": bounds,
            "operations": operations,
            "warnings": warned,
            "notes": noted,
            "shared_data_keys": keys,
            "shared_data_keys_max": ratebound::count::budget::CONFIG_KEYS,
        })),
    );
    if let Some(m) = d.as_object_mut() {
        m.insert("rls_config_disagreements".into(), json!(disagreements));
        m.insert("failed_on_warnings".into(), json!(failed));
        m.insert("shared_entries".into(), json!(shared));
    }
    Ok((out, with_warnings(d, yaml11_json), failed))
}
