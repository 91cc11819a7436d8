//! The console: `check` and `explain` a configuration with the filter's own
//! parser, and print its JSON Schema. Everything it says comes from the
//! library (`ratebound::console`); this file reads arguments and prints.

mod args;

use args::{Command, Format};
use ratebound::config::plan::Plan;
use ratebound::config::{Config, ConfigError};
use ratebound::console::{
    explain, input, openapi, render, rls_config, schema, warnings, words, Level,
};
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
        Command::Schema => {
            out(&schema::text());
            VALID
        }
        Command::Check(args::Check {
            file,
            strict,
            nodes,
            rls_config,
        }) => match load(&file) {
            Err(code) => code,
            Ok(config) => check(&file, &config, strict, nodes, rls_config.as_deref()),
        },
        Command::RlsConfig { file } => match load(&file) {
            Err(code) => code,
            Ok(config) => match rls_config::generate(&config, &file) {
                Some(yaml) => {
                    out(&yaml);
                    VALID
                }
                None => {
                    err(&format!(
                        "ratebound: {file} has no rate_limit_service: no bound is counted by the rate-limit service\n"
                    ));
                    INVALID
                }
            },
        },
        Command::Explain(args::Explain {
            file,
            nodes,
            format,
        }) => match load(&file) {
            Err(code) => code,
            Ok(config) => {
                let e = explain::explain(&Plan::compile(&config), nodes);
                match format {
                    Format::Text => out(&render::text(&e)),
                    Format::Json => out(&format!(
                        "{}\n",
                        serde_json::to_string_pretty(&e).unwrap_or_default()
                    )),
                }
                VALID
            }
        },
    }
}

/// Reads and parses FILE; on failure prints why and returns the exit status.
fn load(file: &str) -> Result<Config, u8> {
    let bytes = input::read(file).map_err(|e| {
        err(&format!("ratebound: cannot read {file}: {e}\n"));
        USAGE
    })?;
    input::load(&bytes, input::detect(file, &bytes)).map_err(|errors| {
        out(&errors_text(file, &errors));
        INVALID
    })
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
                err(&errors_text(file, &errors));
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

fn errors_text(file: &str, errors: &[ConfigError]) -> String {
    let mut s: String = errors.iter().map(|e| format!("error: {e}\n")).collect();
    let n = errors.len();
    s.push_str(&format!(
        "{file}: invalid, {n} error{}\n",
        if n == 1 { "" } else { "s" }
    ));
    s
}

fn check(
    file: &str,
    config: &Config,
    strict: bool,
    nodes: Option<u32>,
    rls_file: Option<&str>,
) -> u8 {
    let ws = warnings(&Plan::compile(config), nodes);
    let mut s: String = ws.iter().map(|w| format!("{w}\n")).collect();
    let mut warned = ws.iter().filter(|w| w.level == Level::Warning).count();
    if let Some(path) = rls_file {
        let text = match input::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => {
                err(&format!("ratebound: cannot read {path}: {e}\n"));
                return USAGE;
            }
        };
        match rls_config::compare(config, &text) {
            Ok(ds) => {
                warned += ds.len();
                for d in ds {
                    s.push_str(&format!("warning: {path}: {d}\n"));
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
    let operations = if operations == 0 {
        String::new()
    } else {
        format!(", {}", plural(operations, "operation"))
    };
    let (tables, singles) = ratebound::config::bound_kinds(config);
    s.push_str(&format!(
        "{file}: {} of the {} shared-data keys one configuration may use \
         ({} keyed per caller, 1,252 keys each; {} per route, 1 each)\n",
        words::number(ratebound::config::budget::keys_of(tables, singles)),
        words::number(ratebound::config::budget::CONFIG_KEYS),
        plural(tables, "bound"),
        plural(singles, "bound"),
    ));
    s.push_str(&format!(
        "{file}: valid ({}, {}{operations}), {}, {}\n",
        plural(config.routes.len(), "route"),
        plural(bounds, "bound"),
        plural(warned, "warning"),
        plural(noted, "note"),
    ));
    let code = if strict && warned > 0 {
        s.push_str(&format!("{file}: failing on warnings (--strict)\n"));
        INVALID
    } else {
        VALID
    };
    out(&s);
    code
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not worth a panic.
fn out(s: &str) {
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

fn err(s: &str) {
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}
