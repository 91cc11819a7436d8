//! `ratebound explain`: every route's bounds in plain words, by phase; as
//! text or JSON.

use crate::args::{self, Format};
use crate::load::{load, name};
use crate::output::{out, pretty, VALID};
use ratebound::config::plan::Plan;
use ratebound::reading::explain;
use ratebound_cli::render;
use serde_json::{json, Value};

pub fn run(e: args::Explain) -> u8 {
    let args::Explain {
        file,
        nodes,
        rate,
        format,
        verbose,
    } = e;
    match load(&file, format) {
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
                texts.push(render::text(&e, verbose));
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
    }
}
