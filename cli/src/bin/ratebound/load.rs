//! Reading a file's configurations (check, explain, rls-config) and
//! telling their errors: in text, each under its line of the file, or as
//! JSON.

use crate::args::Format;
use crate::output::{err, out, pretty, INVALID, USAGE};
use ratebound::config::{Config, ConfigError, ErrorKind};
use ratebound::reading::{structure, Warning};
use ratebound_cli::source::{self, Document, Position};
use ratebound_cli::stream::EnvoyFilter;
use ratebound_cli::{input, snippet};
use serde_json::{json, Value};

/// The configurations of a file that all parse, and the notes on what was
/// skipped.
pub struct Loaded {
    pub configs: Vec<(Document, Config)>,
    pub notes: Vec<String>,
}

/// What one configuration of a file came to.
pub struct Checked {
    pub doc: Document,
    pub result: Result<Config, Vec<ConfigError>>,
}

/// Every configuration of a file parsed, with the notes on what was
/// skipped and the file's EnvoyFilters; or why the file holds none.
pub type Parsed = Result<(Vec<Checked>, Vec<String>, Vec<EnvoyFilter>), source::NotFound>;

/// Reads FILE and parses every configuration in it; on a read failure
/// prints why and returns the status (2).
pub fn read_all(file: &str) -> Result<(String, Parsed), u8> {
    let bytes = input::read(file).map_err(|e| {
        err(&format!("ratebound: cannot read {file}: {e}\n"));
        USAGE
    })?;
    Ok(parse_all(file, &bytes))
}

/// Every configuration in FILE's bytes, parsed.
pub fn parse_all(file: &str, bytes: &[u8]) -> (String, Parsed) {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let found = source::find(bytes, input::detect(file, bytes)).map(|found| {
        let checked = found
            .documents
            .into_iter()
            .map(|doc| {
                // Every problem at once, in the configuration's words; the
                // position of each is shown from the source.
                let result = with_yaml11_errors(&doc, structure::parse(&doc.json));
                let result = with_vm_errors(&doc, result);
                Checked { doc, result }
            })
            .collect();
        (checked, found.notes, found.envoy_filters)
    });
    (text, found)
}

/// A number or key kubectl reads otherwise than written is an error of the
/// configuration (before what the parser says of kubectl's reading).
fn with_yaml11_errors(
    doc: &Document,
    result: Result<Config, Vec<ConfigError>>,
) -> Result<Config, Vec<ConfigError>> {
    let mut errors: Vec<ConfigError> = doc
        .yaml11
        .iter()
        .filter(|f| f.error)
        .map(|f| ConfigError {
            path: f.path.clone(),
            kind: ErrorKind::Invalid,
            message: f.message.clone(),
        })
        .collect();
    match result {
        Ok(config) if errors.is_empty() => Ok(config),
        Ok(_) => Err(errors),
        Err(more) => {
            errors.extend(more);
            Err(errors)
        }
    }
}

/// A WasmPlugin's configuration that its own VM environment would make the
/// filter refuse (the key secret's variable) is invalid, as the filter
/// would find it.
fn with_vm_errors(
    doc: &Document,
    result: Result<Config, Vec<ConfigError>>,
) -> Result<Config, Vec<ConfigError>> {
    let Some(vm) = &doc.vm else {
        return result;
    };
    match result {
        Ok(config) => {
            let errors = vm.key_secret_errors(&config);
            if errors.is_empty() {
                Ok(config)
            } else {
                Err(errors)
            }
        }
        Err(e) => Err(e),
    }
}

/// Reads FILE and parses every configuration in it (explain, rls-config):
/// on failure prints why (in `format`) and returns the exit status.
pub fn load(file: &str, format: Format) -> Result<Loaded, u8> {
    let (text, found) = read_all(file)?;
    match found {
        Err(nf) => {
            report_not_found(file, &text, &nf, format);
            Err(INVALID)
        }
        Ok((checked, notes, _)) if checked.is_empty() => {
            // Objects of other kinds only: nothing to explain.
            let nf = source::NotFound {
                error: ConfigError {
                    path: "$".into(),
                    kind: ErrorKind::Text,
                    message: "no ratebound configuration here: no Istio WasmPlugin (extensions.istio.io) among the objects".into(),
                },
                position: None,
                notes,
            };
            report_not_found(file, &text, &nf, format);
            Err(INVALID)
        }
        Ok((checked, notes, _)) => {
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

pub fn report_not_found(file: &str, text: &str, nf: &source::NotFound, format: Format) {
    match format {
        Format::Text => out(&not_found_text(file, text, nf)),
        Format::Json => out(&pretty(&not_found_json(file, nf))),
    }
}

/// Why FILE holds no configuration, with the notes on what was skipped.
pub fn not_found_text(file: &str, text: &str, nf: &source::NotFound) -> String {
    let mut s: String = nf
        .notes
        .iter()
        .map(|n| format!("note: {file}: {n}\n"))
        .collect();
    s.push_str(&error_at(file, text, &nf.error, nf.position));
    s.push_str(&format!("{file}: invalid, 1 error\n"));
    s
}

pub fn not_found_json(file: &str, nf: &source::NotFound) -> Value {
    json!({
        "file": file,
        "valid": false,
        "errors": [error_json(&nf.error, nf.position)],
        "documents": [],
        "notes": nf.notes,
    })
}

/// `file`, or `file (WasmPlugin ns/name, document 2)` for a configuration
/// held by a manifest.
pub fn name(file: &str, doc: &Document) -> String {
    match &doc.holder {
        None => file.to_string(),
        Some(h) => format!("{file} ({h}, document {})", doc.index),
    }
}

pub fn error_json(e: &ConfigError, at: Option<Position>) -> Value {
    json!({
        "path": e.path,
        "message": e.message,
        "line": at.map(|p| p.line),
        "column": at.map(|p| p.column),
    })
}

pub fn warning_json(w: &Warning, at: Option<Position>) -> Value {
    let mut v = serde_json::to_value(w).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("line".into(), json!(at.map(|p| p.line)));
        m.insert("column".into(), json!(at.map(|p| p.column)));
    }
    v
}

/// One configuration's result as JSON (check and explain alike).
pub fn document_json(file: &str, c: &Checked, ws: &[Warning], counts: Option<Value>) -> Value {
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
pub fn is_key_error(e: &ConfigError) -> bool {
    e.kind == ErrorKind::UnknownField
}

/// `error: …` with the line of `text` at `at` and a caret under the
/// column; coloured on a terminal unless NO_COLOR is set.
pub fn error_at(file: &str, text: &str, e: &ConfigError, at: Option<Position>) -> String {
    use std::io::IsTerminal;
    let colour = snippet::Colour::choose(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    snippet::error(file, text, &e.to_string(), at, None, colour)
}

/// The errors in the order they appear in the file (those without a
/// position last).
pub fn in_file_order<'a>(doc: &Document, errors: &'a [ConfigError]) -> Vec<&'a ConfigError> {
    let mut v: Vec<&ConfigError> = errors.iter().collect();
    v.sort_by_key(|e| {
        doc.position(&e.path, is_key_error(e))
            .map_or((u32::MAX, u32::MAX), |p| (p.line, p.column))
    });
    v
}

pub fn errors_text(file: &str, text: &str, doc: &Document, errors: &[ConfigError]) -> String {
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
