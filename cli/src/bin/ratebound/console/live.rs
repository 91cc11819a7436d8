//! Live rates: every `--admin`'s /stats read on each request of the page
//! (every 2 s), as `ratebound top` reads them, per node and summed per
//! bound.

use ratebound_cli::top::{self, Sample, Top, TRACKED_CAP};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub struct Live {
    admins: Vec<String>,
    /// (admin URL, its address)
    addresses: Vec<String>,
    /// Each admin's last sample.
    before: Vec<Option<(Instant, Sample)>>,
}

impl Live {
    pub fn new(admins: &[String]) -> Result<Live, String> {
        let addresses = admins
            .iter()
            .map(|a| top::admin_address(a).map_err(|e| format!("--admin {a}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Live {
            admins: admins.to_vec(),
            before: vec![None; admins.len()],
            addresses,
        })
    }

    pub fn admins(&self) -> &[String] {
        &self.admins
    }

    /// One reading of every admin: each node's rows since the last reading
    /// (none on the first), and per bound the nodes side by side and summed.
    pub fn read(&mut self) -> Value {
        let mut nodes = Vec::new();
        let mut views: Vec<Option<Top>> = Vec::new();
        for ((admin, address), before) in self
            .admins
            .iter()
            .zip(&self.addresses)
            .zip(self.before.iter_mut())
        {
            match top::fetch(address, Duration::from_secs(1)) {
                Err(e) => {
                    nodes.push(json!({"admin": admin, "error": e}));
                    views.push(None);
                }
                Ok(text) => {
                    let now = (Instant::now(), top::parse_stats(&text));
                    let view = before.as_ref().map(|(t, s)| {
                        top::compute(admin, s, &now.1, now.0.duration_since(*t).as_secs_f64())
                    });
                    nodes.push(json!({"admin": admin, "top": view}));
                    views.push(view);
                    *before = Some(now);
                }
            }
        }
        json!({ "nodes": nodes, "bounds": summed(&views), "tracked_cap": TRACKED_CAP })
    }
}

/// Per bound (instance, route, bound): each node's allowed and refused per
/// second and tracked callers, and their sums.
fn summed(views: &[Option<Top>]) -> Vec<Value> {
    let mut rows: BTreeMap<(String, String, String), Vec<Value>> = BTreeMap::new();
    for (k, v) in views.iter().enumerate() {
        let Some(v) = v else { continue };
        for r in &v.bounds {
            let entry = rows
                .entry((r.instance.clone(), r.route.clone(), r.bound.clone()))
                .or_insert_with(|| vec![Value::Null; views.len()]);
            if let Some(slot) = entry.get_mut(k) {
                *slot = json!({
                    "allowed_per_s": r.allowed.per_s,
                    "refused_per_s": r.refused.per_s,
                    "would_refuse_per_s": r.would_refuse.per_s,
                    "refused_total": r.refused.total,
                    "tracked": r.tracked,
                });
            }
        }
    }
    rows.into_iter()
        .map(|((instance, route, bound), per_node)| {
            let sum = |field: &str| -> f64 {
                per_node
                    .iter()
                    .filter_map(|n| n.get(field).and_then(Value::as_f64))
                    .sum()
            };
            let tracked: Option<u64> = per_node
                .iter()
                .filter_map(|n| n.get("tracked").and_then(Value::as_u64))
                .reduce(|a, b| a + b);
            let reporting = per_node.iter().filter(|n| !n.is_null()).count() as u64;
            json!({
                "instance": instance,
                "route": route,
                "bound": bound,
                "nodes": per_node,
                "sum": {
                    "allowed_per_s": sum("allowed_per_s"),
                    "refused_per_s": sum("refused_per_s"),
                    "would_refuse_per_s": sum("would_refuse_per_s"),
                    "tracked": tracked,
                    "tracked_cap": TRACKED_CAP * reporting,
                },
            })
        })
        .collect()
}
