//! `ratebound rls-config`: the envoyproxy/ratelimit configuration for a
//! configuration's installation bounds, as the file or in a ConfigMap.

use crate::args::{Format, RlsFormat};
use crate::load::{load, name};
use crate::output::{err, out, INVALID, USAGE, VALID};
use ratebound_cli::rls_config;

/// The service's file in the ConfigMap deploy/kubernetes/ratelimit.yaml
/// mounts: the service reads every key of it as a file, so the domain names
/// the key and several configurations can share the map.
fn configmap(yaml: &str, domain: &str) -> String {
    let mut s = String::from(
        "apiVersion: v1\n\
         kind: ConfigMap\n\
         metadata:\n  \
         name: ratelimit-config\n  \
         namespace: ratelimit\n  \
         labels:\n    \
         app.kubernetes.io/name: ratelimit\n\
         data:\n",
    );
    s.push_str(&format!("  {domain}.yaml: |\n"));
    for line in yaml.lines() {
        if line.is_empty() {
            s.push('\n');
        } else {
            s.push_str(&format!("    {line}\n"));
        }
    }
    s
}

pub fn run(file: &str, format: RlsFormat) -> u8 {
    match load(file, Format::Text) {
        Err(code) => code,
        Ok(loaded) => {
            let [(doc, config)] = &loaded.configs[..] else {
                err(&format!(
                    "ratebound: {file} holds {} configurations; rls-config reads one\n",
                    loaded.configs.len()
                ));
                return USAGE;
            };
            match rls_config::generate(config, &name(file, doc)) {
                Some(yaml) => {
                    match (format, &config.rate_limit_service) {
                        (RlsFormat::Configmap, Some(service)) => {
                            out(&configmap(&yaml, &service.domain));
                        }
                        _ => out(&yaml),
                    }
                    VALID
                }
                None => {
                    err(&format!(
                        "ratebound: {} has no rate_limit_service: no bound is counted by the rate-limit service\n",
                        name(file, doc)
                    ));
                    INVALID
                }
            }
        }
    }
}
