//! `ratebound rls-config`: the envoyproxy/ratelimit configuration for a
//! configuration's installation bounds, as the file or in a ConfigMap; for
//! several configurations (one domain each), one ConfigMap per domain.

use crate::args::{Format, RlsConfig, RlsFormat};
use crate::load::{load, name};
use crate::output::{err, out, INVALID, USAGE, VALID};
use ratebound_cli::rls_config::{self, Generated};

/// The service configuration of FILE's one configuration, or the status to
/// stop with (after saying why).
fn generated(file: &str) -> Result<Generated, u8> {
    let loaded = load(file, Format::Text)?;
    let [(doc, config)] = &loaded.configs[..] else {
        err(&format!(
            "ratebound: {file} holds {} configurations; rls-config reads one per file\n",
            loaded.configs.len()
        ));
        return Err(USAGE);
    };
    let source = name(file, doc);
    match (
        rls_config::generate(config, &source),
        &config.rate_limit_service,
    ) {
        (Some(yaml), Some(service)) => Ok(Generated {
            source,
            domain: service.domain.clone(),
            yaml,
        }),
        _ => {
            err(&format!(
                "ratebound: {source} has no rate_limit_service: no bound is counted by the rate-limit service\n"
            ));
            Err(INVALID)
        }
    }
}

pub fn run(a: &RlsConfig) -> u8 {
    if a.format == RlsFormat::Yaml && (a.files.len() > 1 || !a.name.is_empty()) {
        err(
            "ratebound: rls-config: the service reads one file per domain; for several \
             configurations or a ConfigMap --name, use --format configmap (one ConfigMap \
             per domain), or run rls-config once per file\n",
        );
        return USAGE;
    }
    if a.files.iter().filter(|f| *f == "-").count() > 1 {
        err("ratebound: rls-config: stdin (-) can be read once\n");
        return USAGE;
    }
    let mut items = Vec::new();
    for file in &a.files {
        match generated(file) {
            Ok(g) => items.push(g),
            Err(code) => return code,
        }
    }
    match a.format {
        RlsFormat::Yaml => {
            // One file, checked above.
            for g in &items {
                out(&g.yaml);
            }
            VALID
        }
        RlsFormat::Configmap => match rls_config::configmap_names(&items, &a.name) {
            Ok(names) => {
                let maps: Vec<String> = names
                    .iter()
                    .zip(&items)
                    .map(|(n, g)| rls_config::configmap(n, &g.domain, &g.yaml))
                    .collect();
                out(&maps.join("---\n"));
                VALID
            }
            Err(why) => {
                err(&format!("ratebound: rls-config: {why}\n"));
                INVALID
            }
        },
    }
}
