//! `ratebound openapi`: operations of an OpenAPI document given bounds of
//! their own, written into a configuration.

use crate::args;
use crate::output::{err, out, plural, INVALID, USAGE, VALID};
use ratebound::config::plan::Plan;
use ratebound::reading::{warnings, Severity};
use ratebound_cli::{input, openapi};

/// `ratebound openapi`: the configuration on stdout; what was done, the
/// errors and the warnings on stderr (stdout stays a configuration).
pub fn run(o: &args::Openapi) -> u8 {
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
    let request = openapi::OpenapiRequest {
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
                .filter(|w| w.level == Severity::Warning)
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
