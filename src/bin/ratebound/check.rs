//! `ratebound check`: every error of every configuration in a file, where
//! it is; or the warnings, notes and counts of a valid one.

use crate::args::Format;
use crate::load::{document_json, errors_text, name, read_all, report_not_found};
use crate::output::{err, out, plural, pretty, INVALID, USAGE, VALID};
use ratebound::config::plan::Plan;
use ratebound::console::{input, rls_config, warnings, words, Level};
use serde_json::json;

pub fn run(
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
        let keys = ratebound::count::budget::keys_of(tables, singles);
        s.push_str(&format!(
            "{label}: {} of the {} shared-data keys one configuration may use \
             ({} keyed per caller, {} keys each; {} per route, 1 each)\n",
            words::number(keys),
            words::number(ratebound::count::budget::CONFIG_KEYS),
            plural(tables, "bound"),
            words::number(ratebound::count::budget::TABLE_KEYS),
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
                "shared_data_keys_max": ratebound::count::budget::CONFIG_KEYS,
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
