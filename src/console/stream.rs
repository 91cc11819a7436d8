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

use crate::config::{Config, Scope};
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
        crate::config::parse(&serde_json::to_vec(&c).unwrap()).unwrap()
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
            "/envoy-demo/istio/envoyfilter-rls.yaml"
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
}
