//! Checks across everything `check` reads in one run (several files, a
//! directory, a YAML stream): what no single configuration shows.
//!
//! - `shared-instance`: two WasmPlugins with the same configuration
//!   `instance` on the same workloads. The instance prefixes every stat
//!   (`ratebound.<instance>.…`) and every shared-data key, so their counters
//!   and stats collide.
//! - `rls-cluster-not-added`: a WasmPlugin whose installation or fleet
//!   bounds call `rate_limit_service.cluster` while the EnvoyFilters read in
//!   the same run add clusters of other names, or none.

use ratebound::config::{Config, ConfigError, ErrorKind, Scope, MIN_SECRET_BYTES};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// The workloads a WasmPlugin applies to, as its manifest says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workloads {
    pub namespace: Option<String>,
    /// `spec.selector.matchLabels`; `None` without a selector.
    pub labels: Option<BTreeMap<String, String>>,
    /// `spec.targetRefs` (and the older `spec.targetRef`), each
    /// `group/kind/name`.
    pub target_refs: Vec<String>,
}

impl Workloads {
    /// Of a WasmPlugin manifest (as JSON).
    pub fn of(manifest: &Value) -> Workloads {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let spec = manifest.get("spec");
        let labels = spec
            .and_then(|s| s.get("selector"))
            .filter(|s| !s.is_null())
            .map(|s| {
                s.get("matchLabels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .unwrap_or_default()
            });
        let refs = spec
            .and_then(|s| s.get("targetRefs"))
            .and_then(Value::as_array);
        let single = spec.and_then(|s| s.get("targetRef"));
        let target_refs = refs
            .into_iter()
            .flatten()
            .chain(single)
            .map(|r| {
                format!(
                    "{}/{}/{}",
                    text(r.get("group")).unwrap_or_default(),
                    text(r.get("kind")).unwrap_or_default(),
                    text(r.get("name")).unwrap_or_default()
                )
            })
            .collect();
        Workloads {
            namespace: text(manifest.get("metadata").and_then(|m| m.get("namespace"))),
            labels,
            target_refs,
        }
    }

    /// Whether some workload may run both: the same namespace, and a
    /// common target, or (neither naming targets) one selector's labels
    /// within the other's (no selector is every workload). Selectors on
    /// different labels may still meet on one workload: not told.
    pub fn overlap(&self, other: &Workloads) -> bool {
        if self.namespace != other.namespace {
            return false;
        }
        match (self.target_refs.is_empty(), other.target_refs.is_empty()) {
            (false, false) => self
                .target_refs
                .iter()
                .any(|r| other.target_refs.contains(r)),
            (true, true) => {
                let empty = BTreeMap::new();
                let a = self.labels.as_ref().unwrap_or(&empty);
                let b = other.labels.as_ref().unwrap_or(&empty);
                let within = |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| {
                    x.iter().all(|(k, v)| y.get(k) == Some(v))
                };
                within(a, b) || within(b, a)
            }
            // A selector and a target: which pods a Gateway runs on is not
            // in the manifests.
            _ => false,
        }
    }
}

/// How a WasmPlugin gives its VM an environment variable
/// (`spec.vmConfig.env[].valueFrom`; Istio's default is `INLINE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvFrom {
    /// The value written in the WasmPlugin (`value`).
    Inline(String),
    /// The proxy's own environment, which the manifests do not show.
    Host,
}

/// One entry of a WasmPlugin's `spec.vmConfig.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmEnv {
    pub name: String,
    pub from: EnvFrom,
}

/// What a WasmPlugin says of the VM it runs: the module and the
/// environment variables it is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginVm {
    /// `spec.url`.
    pub url: Option<String>,
    /// `spec.sha256`.
    pub sha256: Option<String>,
    /// `spec.vmConfig.env`.
    pub env: Vec<VmEnv>,
}

impl PluginVm {
    /// Of the object that holds a plugin's module fields (as JSON): a
    /// WasmPlugin's `spec`, a TrafficExtension's `spec.wasm`.
    pub fn of(spec: Option<&Value>) -> PluginVm {
        let text = |k: &str| {
            spec.and_then(|s| s.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let env = spec
            .and_then(|s| s.get("vmConfig"))
            .and_then(|v| v.get("env"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let name = e.get("name")?.as_str()?.to_string();
                let from = match e.get("valueFrom").and_then(Value::as_str) {
                    Some("HOST") => EnvFrom::Host,
                    _ => EnvFrom::Inline(
                        e.get("value")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ),
                };
                Some(VmEnv { name, from })
            })
            .collect();
        PluginVm {
            url: text("url"),
            sha256: text("sha256"),
            env,
        }
    }

    /// What the filter would refuse in `config` for want of this VM
    /// environment: the key secret's variable missing from
    /// `spec.vmConfig.env`, or written there too short. (A `HOST` variable's
    /// value is in the proxy's environment, which no manifest shows.)
    /// The same for a rotation's other secret (`key_secret.also_read.env`).
    pub fn key_secret_errors(&self, config: &Config) -> Vec<ConfigError> {
        let Some(k) = config
            .rate_limit_service
            .as_ref()
            .and_then(|s| s.key_secret.as_ref())
        else {
            return Vec::new();
        };
        let also = k.also_read.as_ref().and_then(|a| a.env.as_ref());
        [
            (k.env.as_ref(), "$.rate_limit_service.key_secret.env"),
            (also, "$.rate_limit_service.key_secret.also_read.env"),
        ]
        .into_iter()
        .filter_map(|(name, path)| self.env_error(name?, path))
        .collect()
    }

    fn env_error(&self, name: &str, path: &str) -> Option<ConfigError> {
        match self.env.iter().rev().find(|e| e.name == name) {
            None => Some(ConfigError {
                path: path.into(),
                kind: ErrorKind::Invalid,
                message: format!(
                    "the WasmPlugin's spec.vmConfig.env has no {name:?}, so the filter would \
                     refuse this configuration (the variable is not set in the VM): add \
                     `{{name: {name}, valueFrom: HOST}}` to spec.vmConfig.env and set {name} in \
                     the proxy's environment from a Secret (docs/istio.md, \"The key \
                     secret\"); the Helm chart derives spec.vmConfig.env from this field"
                ),
            }),
            Some(VmEnv {
                from: EnvFrom::Inline(v),
                ..
            }) if v.len() < MIN_SECRET_BYTES => Some(ConfigError {
                path: path.into(),
                kind: ErrorKind::Invalid,
                message: format!(
                    "the WasmPlugin's spec.vmConfig.env gives {name:?} inline with {} bytes, \
                     fewer than {MIN_SECRET_BYTES}, so the filter would refuse this \
                     configuration: use `valueFrom: HOST` and set {name} in the proxy's \
                     environment from a Secret (docs/istio.md, \"The key secret\")",
                    v.len()
                ),
            }),
            Some(_) => None,
        }
    }
}

/// The clusters an EnvoyFilter adds: `configPatches` with `applyTo:
/// CLUSTER` and `patch.operation: ADD` (named by `patch.value.name`), and
/// those a `BOOTSTRAP` patch puts in `static_resources.clusters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvoyFilter {
    /// `EnvoyFilter istio-system/ratebound-rls (FILE, document 2)`.
    pub name: String,
    pub clusters: Vec<String>,
}

impl EnvoyFilter {
    pub fn of(name: String, manifest: &Value) -> EnvoyFilter {
        let patches = manifest
            .get("spec")
            .and_then(|s| s.get("configPatches"))
            .and_then(Value::as_array);
        let applied_to = |p: &Value, to: &str| p.get("applyTo").and_then(Value::as_str) == Some(to);
        let added = patches
            .into_iter()
            .flatten()
            .filter(|p| applied_to(p, "CLUSTER"))
            .filter_map(|p| p.get("patch"))
            .filter(|p| p.get("operation").and_then(Value::as_str) == Some("ADD"))
            .filter_map(|p| p.get("value")?.get("name")?.as_str());
        let bootstrap = patches
            .into_iter()
            .flatten()
            .filter(|p| applied_to(p, "BOOTSTRAP"))
            .filter_map(|p| {
                p.get("patch")?
                    .get("value")?
                    .get("static_resources")?
                    .get("clusters")?
                    .as_array()
            })
            .flatten()
            .filter_map(|c| c.get("name")?.as_str());
        let clusters = added.chain(bootstrap).map(str::to_string).collect();
        EnvoyFilter { name, clusters }
    }
}

/// A WasmPlugin's configuration, for the checks across a run.
#[derive(Debug, Clone, Copy)]
pub struct Plugin<'a> {
    /// `FILE (WasmPlugin ns/name, document N)`.
    pub name: &'a str,
    /// `WasmPlugin ns/name`: two documents of one object are one plugin
    /// (the later one applied wins), not two that collide.
    pub object: &'a str,
    pub workloads: &'a Workloads,
    pub config: &'a Config,
}

impl Plugin<'_> {
    /// The cluster its installation or fleet bounds call, if it has any.
    fn rls_cluster(&self) -> Option<&str> {
        let service = self.config.rate_limit_service.as_ref()?;
        let shared = self.config.routes.iter().any(|r| {
            r.bounds
                .iter()
                .chain(r.operations.iter().flat_map(|o| o.bounds.iter()))
                .any(|b| b.scope != Scope::Node)
        });
        shared.then_some(service.cluster.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrossCode {
    SharedInstance,
    RlsClusterNotAdded,
}

impl CrossCode {
    pub fn as_str(self) -> &'static str {
        match self {
            CrossCode::SharedInstance => "shared-instance",
            CrossCode::RlsClusterNotAdded => "rls-cluster-not-added",
        }
    }
}

/// A warning about several documents (or one and what the run lacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CrossCheck {
    pub code: CrossCode,
    /// Always `warning` (for tools that read every warning alike).
    pub level: &'static str,
    /// The documents it is about, by name.
    pub documents: Vec<String>,
    pub message: String,
}

impl fmt::Display for CrossCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "warning[{}]: {}", self.code.as_str(), self.message)
    }
}

fn warning(code: CrossCode, documents: Vec<String>, message: String) -> CrossCheck {
    CrossCheck {
        code,
        level: "warning",
        documents,
        message,
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The checks across every WasmPlugin and EnvoyFilter of a run.
pub fn cross_check(plugins: &[Plugin], filters: &[EnvoyFilter]) -> Vec<CrossCheck> {
    let mut out = Vec::new();
    for (i, a) in plugins.iter().enumerate() {
        for b in plugins.iter().skip(i + 1) {
            if a.object != b.object
                && a.config.instance == b.config.instance
                && a.workloads.overlap(b.workloads)
            {
                out.push(warning(
                    CrossCode::SharedInstance,
                    vec![a.name.to_string(), b.name.to_string()],
                    format!(
                        "{} and {} both run instance {:?} on the same workloads: their stats (ratebound.{}.…) and shared-data keys collide, so each counts the other's requests; give each its own pluginConfig.instance",
                        a.name, b.name, a.config.instance, a.config.instance
                    ),
                ));
            }
        }
    }
    if filters.is_empty() {
        // The cluster may come from elsewhere (the bootstrap, another
        // repository): nothing to compare with.
        return out;
    }
    let added: Vec<String> = filters.iter().flat_map(|f| f.clusters.clone()).collect();
    for p in plugins {
        let Some(cluster) = p.rls_cluster() else {
            continue;
        };
        if added.iter().any(|c| c == cluster) {
            continue;
        }
        let message = if added.is_empty() {
            format!(
                "{}: rate_limit_service.cluster is {cluster:?}, but no EnvoyFilter read here adds a cluster: add one named {cluster:?} (configPatches applyTo: CLUSTER, operation: ADD, as envoy-demo/istio/envoyfilter-rls.yaml does), or every call to the service fails and on_error decides",
                p.name
            )
        } else {
            let by: Vec<String> = filters
                .iter()
                .filter(|f| !f.clusters.is_empty())
                .map(|f| format!("{} adds {}", f.name, quoted(&f.clusters)))
                .collect();
            format!(
                "{}: rate_limit_service.cluster is {cluster:?}, but the EnvoyFilters read here add no cluster of that name ({}): name the same cluster in both, or every call to the service fails and on_error decides",
                p.name,
                by.join("; ")
            )
        };
        out.push(warning(
            CrossCode::RlsClusterNotAdded,
            vec![p.name.to_string()],
            message,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workloads(v: Value) -> Workloads {
        Workloads::of(&v)
    }

    fn config(instance: &str, cluster: Option<&str>) -> Config {
        let mut c = json!({"instance": instance, "routes": [{"name": "a", "bounds": [
            {"per": "address", "limit": 5, "window": "PT1M"}]}]});
        if let Some(cluster) = cluster {
            c["rate_limit_service"] = json!({"cluster": cluster, "domain": "d"});
            c["routes"][0]["bounds"][0]["scope"] = json!("installation");
        }
        ratebound::config::parse(&serde_json::to_vec(&c).unwrap()).unwrap()
    }

    #[test]
    fn workloads_are_read_from_the_manifest() {
        let w = workloads(json!({"metadata": {"namespace": "shop"}, "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "targetRefs": [{"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "public"}]}}));
        assert_eq!(w.namespace.as_deref(), Some("shop"));
        assert_eq!(w.labels.unwrap()["app"], "a");
        assert_eq!(w.target_refs, ["gateway.networking.k8s.io/Gateway/public"]);
        assert_eq!(workloads(json!({"spec": {}})), Workloads::default());
    }

    #[test]
    fn selectors_overlap_when_one_is_within_the_other() {
        let sel = |ns: &str, labels: Value| {
            workloads(
                json!({"metadata": {"namespace": ns}, "spec": {"selector": {"matchLabels": labels}}}),
            )
        };
        let all = workloads(json!({"metadata": {"namespace": "shop"}, "spec": {}}));
        let app = sel("shop", json!({"app": "a"}));
        let app_tier = sel("shop", json!({"app": "a", "tier": "x"}));
        let other = sel("shop", json!({"app": "b"}));
        assert!(app.overlap(&app_tier) && app_tier.overlap(&app));
        assert!(all.overlap(&app) && all.overlap(&all));
        assert!(!app.overlap(&other));
        assert!(!app.overlap(&sel("elsewhere", json!({"app": "a"}))));
        let gw = |name: &str| {
            workloads(
                json!({"metadata": {"namespace": "shop"}, "spec": {"targetRefs": [{"kind": "Gateway", "name": name}]}}),
            )
        };
        assert!(gw("public").overlap(&gw("public")));
        assert!(!gw("public").overlap(&gw("private")));
        assert!(!gw("public").overlap(&all));
    }

    #[test]
    fn one_instance_on_the_same_workloads_is_a_warning() {
        let w = workloads(
            json!({"metadata": {"namespace": "shop"}, "spec": {"selector": {"matchLabels": {"app": "a"}}}}),
        );
        let wide = workloads(json!({"metadata": {"namespace": "shop"}}));
        let (demo, demo2, other) = (
            config("demo", None),
            config("demo", None),
            config("other", None),
        );
        let plugins = [
            Plugin {
                name: "a.yaml (WasmPlugin shop/a, document 1)",
                object: "WasmPlugin shop/a",
                workloads: &w,
                config: &demo,
            },
            Plugin {
                name: "b.yaml (WasmPlugin shop/b, document 1)",
                object: "WasmPlugin shop/b",
                workloads: &wide,
                config: &demo2,
            },
            Plugin {
                name: "c.yaml (WasmPlugin shop/c, document 1)",
                object: "WasmPlugin shop/c",
                workloads: &wide,
                config: &other,
            },
            // The same object again (another file of it): not a second plugin.
            Plugin {
                name: "a2.yaml (WasmPlugin shop/a, document 1)",
                object: "WasmPlugin shop/a",
                workloads: &w,
                config: &demo,
            },
        ];
        let ws = cross_check(&plugins, &[]);
        assert_eq!(ws.len(), 2, "{ws:?}");
        assert_eq!(ws[0].code, CrossCode::SharedInstance);
        assert_eq!(ws[1].documents, [plugins[1].name, plugins[3].name]);
        assert_eq!(ws[0].documents, [plugins[0].name, plugins[1].name]);
        assert!(
            ws[0]
                .message
                .contains("both run instance \"demo\" on the same workloads"),
            "{}",
            ws[0].message
        );
    }

    #[test]
    fn the_service_cluster_must_be_one_an_envoy_filter_adds() {
        let w = Workloads::default();
        let uses = config("signin", Some("ratebound-rls"));
        let plugins = [Plugin {
            name: "p",
            object: "WasmPlugin p",
            workloads: &w,
            config: &uses,
        }];
        let filter = |clusters: &[&str]| EnvoyFilter {
            name: "EnvoyFilter istio-system/rls".into(),
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
        };
        assert!(
            cross_check(&plugins, &[]).is_empty(),
            "no EnvoyFilter: nothing to compare"
        );
        assert!(cross_check(&plugins, &[filter(&["ratebound-rls"])]).is_empty());
        let ws = cross_check(&plugins, &[filter(&["rls"])]);
        assert_eq!(ws[0].code, CrossCode::RlsClusterNotAdded);
        assert!(
            ws[0].message.contains(
                "(EnvoyFilter istio-system/rls adds \"rls\"): name the same cluster in both"
            ),
            "{}",
            ws[0].message
        );
        let ws = cross_check(&plugins, &[filter(&[])]);
        assert!(
            ws[0].message.contains(
                "no EnvoyFilter read here adds a cluster: add one named \"ratebound-rls\""
            ),
            "{}",
            ws[0].message
        );
        // Node bounds only: the service is never called.
        let node = config("n", None);
        let plugins = [Plugin {
            name: "p",
            object: "WasmPlugin p",
            workloads: &w,
            config: &node,
        }];
        assert!(cross_check(&plugins, &[filter(&[])]).is_empty());
    }

    #[test]
    fn an_envoy_filter_adds_the_clusters_of_its_add_patches() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../envoy-demo/istio/envoyfilter-rls.yaml"
        ))
        .unwrap();
        let v: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(EnvoyFilter::of("f".into(), &v).clusters, ["ratebound-rls"]);
        let merge = json!({"spec": {"configPatches": [
            {"applyTo": "CLUSTER", "patch": {"operation": "MERGE", "value": {"name": "x"}}},
            {"applyTo": "HTTP_FILTER", "patch": {"operation": "ADD", "value": {"name": "y"}}}]}});
        assert!(EnvoyFilter::of("f".into(), &merge).clusters.is_empty());
        let bootstrap = json!({"spec": {"configPatches": [
            {"applyTo": "BOOTSTRAP", "patch": {"operation": "MERGE", "value": {
                "static_resources": {"clusters": [{"name": "rls"}]}}}}]}});
        assert_eq!(EnvoyFilter::of("f".into(), &bootstrap).clusters, ["rls"]);
    }
    fn with_secret(env: &str) -> Config {
        let c = json!({"instance": "i",
            "rate_limit_service": {"cluster": "rls", "domain": "d", "key_secret": {"env": env}},
            "routes": [{"name": "a", "bounds": [
                {"per": "address", "scope": "installation", "limit": 5, "window": "PT1M"}]}]});
        ratebound::config::parse(c.to_string().as_bytes()).unwrap()
    }

    fn vm(env: Value) -> PluginVm {
        PluginVm::of(Some(&json!({"url": "oci://r/rb:1", "sha256": "abc",
            "vmConfig": {"env": env}})))
    }

    #[test]
    fn a_wasmplugin_says_its_module_and_vm_environment() {
        let v = vm(json!([{"name": "K", "valueFrom": "HOST"}, {"name": "I", "value": "x"}]));
        assert_eq!(v.url.as_deref(), Some("oci://r/rb:1"));
        assert_eq!(v.sha256.as_deref(), Some("abc"));
        assert_eq!(
            v.env,
            vec![
                VmEnv {
                    name: "K".into(),
                    from: EnvFrom::Host
                },
                // INLINE is Istio's default.
                VmEnv {
                    name: "I".into(),
                    from: EnvFrom::Inline("x".into())
                },
            ]
        );
        assert_eq!(PluginVm::of(Some(&json!({}))), PluginVm::default());
        assert_eq!(PluginVm::of(None), PluginVm::default());
    }

    #[test]
    fn the_key_secrets_variable_must_be_in_the_vm_environment() {
        let c = with_secret("RB_KEY");
        // Missing: the error names the path and the fix.
        let e = vm(json!([{"name": "OTHER", "valueFrom": "HOST"}])).key_secret_errors(&c);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "$.rate_limit_service.key_secret.env");
        assert!(e[0]
            .message
            .starts_with("the WasmPlugin's spec.vmConfig.env has no \"RB_KEY\""));
        assert!(
            e[0].message.contains("`{name: RB_KEY, valueFrom: HOST}`"),
            "{}",
            e[0].message
        );
        assert_eq!(PluginVm::default().key_secret_errors(&c).len(), 1);
        // From the host: what it holds is not in the manifests.
        assert!(vm(json!([{"name": "RB_KEY", "valueFrom": "HOST"}]))
            .key_secret_errors(&c)
            .is_empty());
        // Inline: long enough, or the filter refuses it.
        let long = "k".repeat(MIN_SECRET_BYTES);
        assert!(vm(json!([{"name": "RB_KEY", "value": long}]))
            .key_secret_errors(&c)
            .is_empty());
        let e = vm(json!([{"name": "RB_KEY", "valueFrom": "INLINE", "value": "short"}]))
            .key_secret_errors(&c);
        assert!(
            e[0].message.contains("inline with 5 bytes"),
            "{}",
            e[0].message
        );
        // A configuration that reads no variable needs none.
        assert!(PluginVm::default()
            .key_secret_errors(&config("i", Some("rls")))
            .is_empty());
    }

    #[test]
    fn a_rotations_other_secret_must_be_in_the_vm_environment_too() {
        let c = json!({"instance": "i",
            "rate_limit_service": {"cluster": "rls", "domain": "d",
                "key_secret": {"env": "RB_NEW", "also_read": {"env": "RB_OLD"}}},
            "routes": [{"name": "a", "bounds": [
                {"per": "address", "scope": "installation", "limit": 5, "window": "PT1M"}]}]});
        let c = ratebound::config::parse(c.to_string().as_bytes()).unwrap();
        let e = vm(json!([{"name": "RB_NEW", "valueFrom": "HOST"}])).key_secret_errors(&c);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "$.rate_limit_service.key_secret.also_read.env");
        assert!(
            e[0].message.contains("has no \"RB_OLD\""),
            "{}",
            e[0].message
        );
        let both = json!([{"name": "RB_NEW", "valueFrom": "HOST"}, {"name": "RB_OLD", "valueFrom": "HOST"}]);
        assert!(vm(both).key_secret_errors(&c).is_empty());
    }
}
