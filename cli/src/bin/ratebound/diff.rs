//! `ratebound diff OLD NEW`: which counters a push resets, keeps, adds and
//! drops; as text or JSON. Exit 1 when any counts are lost, for CI.

use crate::args::{self, Format};
use crate::load::load;
use crate::output::{err, out, pretty, INVALID, USAGE, VALID};
use ratebound::config::plan::Plan;
use ratebound::config::Config;
use ratebound_cli::diff;
use ratebound_cli::source::Document;

/// The one configuration of `file`, or the exit status (2) after saying why.
fn one(file: &str, format: Format) -> Result<(Document, Config), u8> {
    // An invalid file is a usage error here: exit 1 means "counts lost".
    let loaded = load(file, format).map_err(|_| USAGE)?;
    let mut configs = loaded.configs;
    if configs.len() != 1 {
        err(&format!(
            "ratebound: {file} holds {} configurations; diff reads one in each file\n",
            configs.len()
        ));
        return Err(USAGE);
    }
    configs.pop().ok_or(USAGE)
}

pub fn run(d: &args::Diff) -> u8 {
    let old = match one(&d.old, d.format) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let new = match one(&d.new, d.format) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let new_plan = Plan::compile(&new.1);
    let mut result = diff::diff(&Plan::compile(&old.1), &new_plan);
    // Two WasmPlugins: their modules too.
    if let (Some(o), Some(n)) = (&old.0.vm, &new.0.vm) {
        result.module = diff::module_change(o, n).map(|m| m.naming_tiers(&new_plan));
    }
    match d.format {
        Format::Text => out(&diff::text(&result)),
        Format::Json => out(&pretty(&serde_json::to_value(&result).unwrap_or_default())),
    }
    if result.loses_counts() {
        INVALID
    } else {
        VALID
    }
}
