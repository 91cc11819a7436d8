//! The console: `check` and `explain` a configuration with the filter's own
//! parser, and print its JSON Schema. Everything it says comes from the
//! library (`ratebound::console`); this file reads arguments and prints.

mod args;

use args::{Command, Format};
use ratebound::config::plan::Plan;
use ratebound::config::{Config, ConfigError};
use ratebound::console::source::{Document, Position};
use ratebound::console::{
    explain, input, openapi, render, rls_config, schema, snippet, source, structure, warnings,
    words, Level, Warning,
};
use serde_json::{json, Value};
use std::io::Write;
use std::process::ExitCode;

/// Exit statuses.
const VALID: u8 = 0;
const INVALID: u8 = 1;
const USAGE: u8 = 2;

fn main() -> ExitCode {
    let code = match args::parse(std::env::args_os()) {
        Ok(command) => run(command),
        Err(e) => {
            // Help and --version are "errors" that print to stdout and exit 0;
            // a usage error prints itself with a short usage: exit 2.
            let _ = e.print();
            if e.use_stderr() {
                USAGE
            } else {
                VALID
            }
        }
    };
    ExitCode::from(code)
}

fn run(command: Command) -> u8 {
    match command {
        Command::Version => {
            out(&format!(
                "ratebound {} (git {})\n",
                env!("CARGO_PKG_VERSION"),
                env!("RATEBOUND_GIT_COMMIT")
            ));
            VALID
        }
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut args::command(), "ratebound", &mut buf);
            out(&String::from_utf8_lossy(&buf));
            VALID
        }
        Command::Openapi(o) => generate(&o),
        Command::Top(t) => top(&t),
        Command::Schema => {
            out(&schema::text());
            VALID
        }
        Command::Check(args::Check {
            file,
            strict,
            nodes,
            rls_config,
            format,
        }) => check(&file, strict, nodes, rls_config.as_deref(), format),
        Command::RlsConfig { file } => match load(&file, Format::Text) {
            Err(code) => code,
            Ok(loaded) => {
                let [(doc, config)] = &loaded.configs[..] else {
                    err(&format!(
                        "ratebound: {file} holds {} configurations; rls-config reads one\n",
                        loaded.configs.len()
                    ));
                    return USAGE;
                };
                match rls_config::generate(config, &name(&file, doc)) {
                    Some(yaml) => {
                        out(&yaml);
                        VALID
                    }
                    None => {
                        err(&format!(
                            "ratebound: {} has no rate_limit_service: no bound is counted by the rate-limit service\n",
                            name(&file, doc)
                        ));
                        INVALID
                    }
                }
            }
        },
        Command::Explain(args::Explain {
            file,
            nodes,
            rate,
            format,
        }) => match load(&file, format) {
            Err(code) => code,
            Ok(loaded) => {
                let many = loaded.configs.len() > 1;
                let mut texts = Vec::new();
                let mut jsons = Vec::new();
                for (doc, config) in &loaded.configs {
                    let e = explain::explain_at(&Plan::compile(config), nodes, rate);
                    if many {
                        texts.push(format!("== {}\n", name(&file, doc)));
                    }
                    texts.push(render::text(&e));
                    let e = serde_json::to_value(&e).unwrap_or_default();
                    jsons.push(if many {
                        json!({"document": doc.index, "holder": doc.holder, "explain": e})
                    } else {
                        e
                    });
                }
                match format {
                    Format::Text => {
                        let notes: String = loaded
                            .notes
                            .iter()
                            .map(|n| format!("note: {file}: {n}\n"))
                            .collect();
                        out(&format!("{notes}{}", texts.join("\n")));
                    }
                    Format::Json => {
                        let v = if many {
                            Value::Array(jsons)
                        } else {
                            jsons.pop().unwrap_or_default()
                        };
                        out(&pretty(&v));
                    }
                }
                VALID
            }
        },
    }
}

/// The configurations of a file that all parse, and the notes on what was
/// skipped.
struct Loaded {
    configs: Vec<(Document, Config)>,
    notes: Vec<String>,
}

/// What one configuration of a file came to.
struct Checked {
    doc: Document,
    result: Result<Config, Vec<ConfigError>>,
}

/// Every configuration of a file parsed, with the notes on what was
/// skipped; or why the file holds none.
type Parsed = Result<(Vec<Checked>, Vec<String>), source::NotFound>;

/// Reads FILE and parses every configuration in it; on a read failure
/// prints why and returns the status (2).
fn read_all(file: &str) -> Result<(String, Parsed), u8> {
    let bytes = input::read(file).map_err(|e| {
        err(&format!("ratebound: cannot read {file}: {e}\n"));
        USAGE
    })?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let found = source::find(&bytes, input::detect(file, &bytes)).map(|found| {
        let checked = found
            .documents
            .into_iter()
            .map(|doc| {
                // Every problem at once, in the configuration's words; the
                // position of each is shown from the source.
                let result = structure::parse(&doc.json);
                Checked { doc, result }
            })
            .collect();
        (checked, found.notes)
    });
    Ok((text, found))
}

/// Reads FILE and parses every configuration in it (explain, rls-config):
/// on failure prints why (in `format`) and returns the exit status.
fn load(file: &str, format: Format) -> Result<Loaded, u8> {
    let (text, found) = read_all(file)?;
    match found {
        Err(nf) => {
            report_not_found(file, &text, &nf, format);
            Err(INVALID)
        }
        Ok((checked, notes)) => {
            if checked.iter().any(|c| c.result.is_err()) {
                match format {
                    Format::Text => {
                        let mut s = String::new();
                        for c in &checked {
                            if let Err(errors) = &c.result {
                                s.push_str(&errors_text(file, &text, &c.doc, errors));
                            }
                        }
                        out(&s);
                    }
                    Format::Json => {
                        let docs: Vec<Value> = checked
                            .iter()
                            .map(|c| document_json(file, c, &[], None))
                            .collect();
                        out(&pretty(&json!({
                            "file": file, "valid": false, "documents": docs, "notes": notes,
                        })));
                    }
                }
                return Err(INVALID);
            }
            let configs = checked
                .into_iter()
                .filter_map(|c| c.result.ok().map(|config| (c.doc, config)))
                .collect();
            Ok(Loaded { configs, notes })
        }
    }
}

fn report_not_found(file: &str, text: &str, nf: &source::NotFound, format: Format) {
    match format {
        Format::Text => {
            let mut s: String = nf
                .notes
                .iter()
                .map(|n| format!("note: {file}: {n}\n"))
                .collect();
            s.push_str(&error_at(file, text, &nf.error, nf.position));
            s.push_str(&format!("{file}: invalid, 1 error\n"));
            out(&s);
        }
        Format::Json => out(&pretty(&json!({
            "file": file,
            "valid": false,
            "errors": [error_json(&nf.error, nf.position)],
            "documents": [],
            "notes": nf.notes,
        }))),
    }
}

/// `file`, or `file (WasmPlugin ns/name, document 2)` for a configuration
/// held by a manifest.
fn name(file: &str, doc: &Document) -> String {
    match &doc.holder {
        None => file.to_string(),
        Some(h) => format!("{file} ({h}, document {})", doc.index),
    }
}

fn error_json(e: &ConfigError, at: Option<Position>) -> Value {
    json!({
        "path": e.path,
        "message": e.message,
        "line": at.map(|p| p.line),
        "column": at.map(|p| p.column),
    })
}

fn warning_json(w: &Warning, at: Option<Position>) -> Value {
    let mut v = serde_json::to_value(w).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("line".into(), json!(at.map(|p| p.line)));
        m.insert("column".into(), json!(at.map(|p| p.column)));
    }
    v
}

/// One configuration's result as JSON (check and explain alike).
fn document_json(file: &str, c: &Checked, ws: &[Warning], counts: Option<Value>) -> Value {
    let errors: Vec<Value> = match &c.result {
        Ok(_) => Vec::new(),
        Err(errors) => in_file_order(&c.doc, errors)
            .into_iter()
            .map(|e| error_json(e, c.doc.position(&e.path, is_key_error(e))))
            .collect(),
    };
    let warnings: Vec<Value> = ws
        .iter()
        .map(|w| warning_json(w, c.doc.position(&w.path, false)))
        .collect();
    let mut v = json!({
        "name": name(file, &c.doc),
        "document": c.doc.index,
        "holder": c.doc.holder,
        "at": c.doc.at,
        "valid": c.result.is_ok(),
        "errors": errors,
        "warnings": warnings,
    });
    if let (Some(m), Some(counts)) = (v.as_object_mut(), counts) {
        m.insert("counts".into(), counts);
    }
    v
}

/// An unknown field is shown at its key, other errors at the value.
fn is_key_error(e: &ConfigError) -> bool {
    e.message.starts_with("unknown field")
}

/// `error: …` with the line of `text` at `at` and a caret under the
/// column; coloured on a terminal unless NO_COLOR is set.
fn error_at(file: &str, text: &str, e: &ConfigError, at: Option<Position>) -> String {
    use std::io::IsTerminal;
    let colour = snippet::Colour::choose(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    snippet::error(file, text, &e.to_string(), at, None, colour)
}

/// The errors in the order they appear in the file (those without a
/// position last).
fn in_file_order<'a>(doc: &Document, errors: &'a [ConfigError]) -> Vec<&'a ConfigError> {
    let mut v: Vec<&ConfigError> = errors.iter().collect();
    v.sort_by_key(|e| {
        doc.position(&e.path, is_key_error(e))
            .map_or((u32::MAX, u32::MAX), |p| (p.line, p.column))
    });
    v
}

fn errors_text(file: &str, text: &str, doc: &Document, errors: &[ConfigError]) -> String {
    let mut s = String::new();
    for e in in_file_order(doc, errors) {
        s.push_str(&error_at(
            file,
            text,
            e,
            doc.position(&e.path, is_key_error(e)),
        ));
    }
    let n = errors.len();
    s.push_str(&format!(
        "{}: invalid, {n} error{}\n",
        name(file, doc),
        if n == 1 { "" } else { "s" }
    ));
    s
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// `ratebound openapi`: the configuration on stdout; what was done, the
/// errors and the warnings on stderr (stdout stays a configuration).
fn generate(o: &args::Openapi) -> u8 {
    let read = |file: &str, cap: usize| {
        input::read_capped(file, cap).map_err(|e| {
            err(&format!("ratebound: cannot read {file}: {e}\n"));
            USAGE
        })
    };
    let spec = match read(&o.spec, openapi::MAX_DOCUMENT_BYTES) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let bounds = match read(&o.bounds, ratebound::config::MAX_CONFIG_BYTES) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let base = match &o.config {
        None => None,
        Some(file) => {
            // The base must be valid on its own; its errors name it.
            let bytes = match read(file, ratebound::config::MAX_CONFIG_BYTES) {
                Ok(b) => b,
                Err(code) => return code,
            };
            if let Err(errors) = input::load(&bytes, input::detect(file, &bytes)) {
                let s: String = errors.iter().map(|e| format!("error: {e}\n")).collect();
                err(&format!(
                    "{s}{file}: invalid, {}\n",
                    plural(errors.len(), "error")
                ));
                err("ratebound openapi: the base configuration (--config) is invalid\n");
                return INVALID;
            }
            let json = input::to_json(&bytes, input::detect(file, &bytes))
                .ok()
                .and_then(|j| serde_json::from_slice::<serde_json::Value>(&j).ok());
            match json {
                Some(v) if v.is_object() => Some(v),
                // An empty base is an empty configuration.
                _ => None,
            }
        }
    };
    let fail = |errors: &[openapi::Error]| {
        let mut s: String = errors.iter().map(|e| format!("error: {e}\n")).collect();
        let n = errors.len();
        s.push_str(&format!(
            "ratebound openapi: no configuration written, {n} error{}\n",
            if n == 1 { "" } else { "s" }
        ));
        err(&s);
        INVALID
    };
    let doc = match openapi::read_document(&spec, input::detect(&o.spec, &spec), &o.spec) {
        Ok(d) => d,
        Err(e) => return fail(&[e]),
    };
    let picks = match openapi::read_picks(&bounds, input::detect(&o.bounds, &bounds), &o.bounds) {
        Ok(p) => p,
        Err(e) => return fail(&[e]),
    };
    let request = openapi::Request {
        route: o.route.clone(),
        match_prefix: o.match_prefix.clone(),
        servers: o.servers,
        spec_label: o.spec.clone(),
        bounds_label: o.bounds.clone(),
    };
    match openapi::generate(&doc, &picks, base, &request) {
        Err(errors) => fail(&errors),
        Ok(g) => {
            let mut text = serde_json::to_string_pretty(&g.json).unwrap_or_default();
            text.push('\n');
            out(&text);
            let mut s: String = g.notes.iter().map(|n| format!("note: {n}\n")).collect();
            let ws: Vec<_> = warnings(&Plan::compile(&g.config), None)
                .into_iter()
                .filter(|w| w.level == Level::Warning)
                .collect();
            s.extend(ws.iter().map(|w| format!("{w}\n")));
            let ops: usize = g
                .config
                .routes
                .iter()
                .find(|r| r.name == o.route)
                .map_or(0, |r| r.operations.len());
            s.push_str(&format!(
                "ratebound openapi: route {:?} with {} from {} (OpenAPI {}), {}\n",
                o.route,
                plural(ops, "operation"),
                o.spec,
                doc.version,
                plural(ws.len(), "warning")
            ));
            err(&s);
            VALID
        }
    }
}

fn check(
    file: &str,
    strict: bool,
    nodes: Option<u32>,
    rls_file: Option<&str>,
    format: Format,
) -> u8 {
    let (text, found) = match read_all(file) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let (checked, notes) = match found {
        Err(nf) => {
            report_not_found(file, &text, &nf, format);
            return INVALID;
        }
        Ok(r) => r,
    };
    // The rate-limit service's configuration, read once for every document.
    let rls_text = match rls_file {
        None => None,
        Some(path) => match input::read(path) {
            Ok(b) => Some((path, String::from_utf8_lossy(&b).into_owned())),
            Err(e) => {
                err(&format!("ratebound: cannot read {path}: {e}\n"));
                return USAGE;
            }
        },
    };
    let mut code = VALID;
    let mut s: String = notes
        .iter()
        .map(|n| format!("note: {file}: {n}\n"))
        .collect();
    let mut docs = Vec::new();
    for c in &checked {
        let config = match &c.result {
            Err(errors) => {
                code = INVALID;
                s.push_str(&errors_text(file, &text, &c.doc, errors));
                docs.push(document_json(file, c, &[], None));
                continue;
            }
            Ok(config) => config,
        };
        let label = name(file, &c.doc);
        let ws = warnings(&Plan::compile(config), nodes);
        let mut warned = ws.iter().filter(|w| w.level == Level::Warning).count();
        for w in &ws {
            s.push_str(&format!("{w}\n"));
            if let Some(at) = c.doc.position(&w.path, false) {
                s.push_str(&format!("  --> {file}:{}:{}\n", at.line, at.column));
            }
        }
        let mut disagreements = Vec::new();
        if let Some((path, rls)) = &rls_text {
            match rls_config::compare(config, rls) {
                Ok(ds) => {
                    warned += ds.len();
                    for d in ds {
                        s.push_str(&format!("warning: {path}: {d}\n"));
                        disagreements.push(d);
                    }
                }
                Err(e) => {
                    err(&format!("ratebound: {path}: {e}\n"));
                    return USAGE;
                }
            }
        }
        let noted = ws.iter().filter(|w| w.level != Level::Warning).count();
        let bounds: usize = config.routes.iter().map(|r| r.bounds.len()).sum();
        let operations: usize = config.routes.iter().map(|r| r.operations.len()).sum();
        let ops_text = if operations == 0 {
            String::new()
        } else {
            format!(", {}", plural(operations, "operation"))
        };
        let (tables, singles) = ratebound::config::bound_kinds(config);
        let keys = ratebound::config::budget::keys_of(tables, singles);
        s.push_str(&format!(
            "{label}: {} of the {} shared-data keys one configuration may use \
             ({} keyed per caller, 1,252 keys each; {} per route, 1 each)\n",
            words::number(keys),
            words::number(ratebound::config::budget::CONFIG_KEYS),
            plural(tables, "bound"),
            plural(singles, "bound"),
        ));
        s.push_str(&format!(
            "{label}: valid ({}, {}{ops_text}), {}, {}\n",
            plural(config.routes.len(), "route"),
            plural(bounds, "bound"),
            plural(warned, "warning"),
            plural(noted, "note"),
        ));
        let failed = strict && warned > 0;
        if failed {
            s.push_str(&format!("{label}: failing on warnings (--strict)\n"));
            code = INVALID;
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
                "shared_data_keys_max": ratebound::config::budget::CONFIG_KEYS,
            })),
        );
        if let Some(m) = d.as_object_mut() {
            m.insert("rls_config_disagreements".into(), json!(disagreements));
            m.insert("failed_on_warnings".into(), json!(failed));
        }
        docs.push(d);
    }
    match format {
        Format::Text => out(&s),
        Format::Json => out(&pretty(&json!({
            "file": file,
            "valid": checked.iter().all(|c| c.result.is_ok()),
            "strict": strict,
            "exit": code,
            "errors": [],
            "documents": docs,
            "notes": notes,
        }))),
    }
    code
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `ratebound top`: two samples of the admin endpoint's stats, as rates.
fn top(t: &args::Top) -> u8 {
    use ratebound::console::top as view;
    use std::io::IsTerminal;
    use std::time::{Duration, Instant};
    let address = match view::admin_address(&t.admin) {
        Ok(a) => a,
        Err(e) => {
            err(&format!("ratebound top: {e}\n"));
            return USAGE;
        }
    };
    let timeout = Duration::from_secs(5);
    let sample = || {
        view::fetch(&address, timeout)
            .map(|text| (Instant::now(), view::parse_stats(&text)))
            .map_err(|e| {
                err(&format!("ratebound top: {e}\n"));
                USAGE
            })
    };
    let interval = Duration::from_secs_f64(t.interval);
    let mut before = match sample() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let live = !t.once && std::io::stdout().is_terminal();
    loop {
        std::thread::sleep(interval);
        let after = match sample() {
            Ok(s) => s,
            Err(code) => return code,
        };
        let seconds = after.0.duration_since(before.0).as_secs_f64();
        let view = view::compute(&t.admin, &before.1, &after.1, seconds);
        match t.format {
            Format::Json => out(&pretty(&serde_json::to_value(&view).unwrap_or_default())),
            Format::Text if live => {
                // Home, clear, the view: refreshed in place.
                out(&format!(
                    "\x1b[H\x1b[2J{}(Ctrl-C to quit)\n",
                    view::text(&view, 0)
                ));
            }
            Format::Text => out(&view::text(&view, 0)),
        }
        if t.once || !live {
            return VALID;
        }
        before = after;
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not worth a panic.
fn out(s: &str) {
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

fn err(s: &str) {
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}
