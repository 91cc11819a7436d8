//! `ratebound top`: what a running Envoy is admitting and refusing, from its
//! admin endpoint's `/stats`, per instance, route and bound, as rates over
//! two samples.
//!
//! Stats are `wasmcustom.ratebound.<instance>.<route>.<bound>.<stat>` (an
//! operation's bound is `<operation>.<bound>`) and
//! `wasmcustom.ratebound.<instance>.<stat>`. Names are `[A-Za-z0-9_-]`, so
//! the first part after the instance is the route, the last the stat, and
//! what is between the bound.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How many callers a keyed bound tracks at most (the `tracked` gauge's cap).
pub const TRACKED_CAP: u64 = 10_000;

const PREFIX: &str = "wasmcustom.ratebound.";

/// One reading of `/stats`: every ratebound stat by name.
pub type Sample = BTreeMap<String, u64>;

/// The ratebound stats of `/stats` text (`name: value` lines; histograms
/// and anything else are skipped).
pub fn parse_stats(text: &str) -> Sample {
    text.lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(": ")?;
            let name = name.trim();
            name.starts_with(PREFIX)
                .then_some(())
                .and_then(|()| value.trim().parse::<u64>().ok())
                .map(|v| (name.to_string(), v))
        })
        .collect()
}

/// A stat's route and bound (`shop`, `get-item.per_user`).
type RouteBound<'a> = (&'a str, String);

/// A stat's name split: instance, route and bound (none for an instance
/// stat), stat.
fn split(name: &str) -> Option<(&str, Option<RouteBound<'_>>, &str)> {
    let rest = name.strip_prefix(PREFIX)?;
    let parts: Vec<&str> = rest.split('.').collect();
    match parts[..] {
        [instance, stat] => Some((instance, None, stat)),
        [instance, route, ref between @ .., stat] if !between.is_empty() => {
            Some((instance, Some((route, between.join("."))), stat))
        }
        _ => None,
    }
}

/// A counter: its total and its rate over the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rate {
    pub total: u64,
    pub per_s: f64,
}

/// One bound of one route.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub instance: String,
    pub route: String,
    pub bound: String,
    pub allowed: Rate,
    pub refused: Rate,
    pub would_refuse: Rate,
    /// Callers that could not be tracked because the table was full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Rate>,
    /// Callers tracked now (a node bound keyed per caller), of [`TRACKED_CAP`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracked: Option<u64>,
    /// Calls to and errors of the rate-limit service (installation bounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rls_calls: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rls_errors: Option<Rate>,
}

/// One instance's own stats (store_errors, identity_errors, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    pub instance: String,
    pub stats: BTreeMap<String, Rate>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Top {
    pub admin: String,
    pub interval_s: f64,
    pub tracked_cap: u64,
    /// Every bound, the most refusing first.
    pub bounds: Vec<Row>,
    pub instances: Vec<Instance>,
}

fn rate(before: &Sample, after: &Sample, name: &str, seconds: f64) -> Option<Rate> {
    let total = *after.get(name)?;
    let was = before.get(name).copied().unwrap_or(total);
    // A counter that went down was reset (Envoy restarted): rate from 0.
    let delta = if total >= was { total - was } else { total };
    let per_s = if seconds > 0.0 {
        delta as f64 / seconds
    } else {
        0.0
    };
    Some(Rate { total, per_s })
}

/// The rows of two samples `seconds` apart.
pub fn compute(admin: &str, before: &Sample, after: &Sample, seconds: f64) -> Top {
    let mut rows: BTreeMap<(String, String, String), ()> = BTreeMap::new();
    let mut instances: BTreeMap<String, BTreeMap<String, Rate>> = BTreeMap::new();
    for name in after.keys() {
        match split(name) {
            Some((instance, Some((route, bound)), _)) => {
                rows.insert((instance.into(), route.into(), bound), ());
            }
            Some((instance, None, stat)) => {
                if let Some(r) = rate(before, after, name, seconds) {
                    instances
                        .entry(instance.to_string())
                        .or_default()
                        .insert(stat.to_string(), r);
                }
            }
            None => {}
        }
    }
    let mut bounds: Vec<Row> = rows
        .into_keys()
        .map(|(instance, route, bound)| {
            let base = format!("{PREFIX}{instance}.{route}.{bound}");
            let r = |stat: &str| rate(before, after, &format!("{base}.{stat}"), seconds);
            Row {
                allowed: r("allowed").unwrap_or_default(),
                refused: r("refused").unwrap_or_default(),
                would_refuse: r("would_refuse").unwrap_or_default(),
                overflow: r("overflow"),
                tracked: after.get(&format!("{base}.tracked")).copied(),
                rls_calls: r("rls_calls"),
                rls_errors: r("rls_errors"),
                instance,
                route,
                bound,
            }
        })
        .collect();
    bounds.sort_by(|a, b| {
        b.refused
            .per_s
            .total_cmp(&a.refused.per_s)
            .then(b.would_refuse.per_s.total_cmp(&a.would_refuse.per_s))
            .then(b.refused.total.cmp(&a.refused.total))
            .then(b.allowed.per_s.total_cmp(&a.allowed.per_s))
    });
    Top {
        admin: admin.to_string(),
        interval_s: seconds,
        tracked_cap: TRACKED_CAP,
        bounds,
        instances: instances
            .into_iter()
            .map(|(instance, stats)| Instance { instance, stats })
            .collect(),
    }
}

fn per_s(r: f64) -> String {
    if r == 0.0 {
        "0".into()
    } else if r < 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.0}")
    }
}

/// The view as a table, `width` columns wide at most (0: no limit).
pub fn text(t: &Top, width: usize) -> String {
    let mut lines = vec![format!(
        "ratebound top: {}, rates over {:.1} s; bounds by refusals",
        t.admin, t.interval_s
    )];
    let header = [
        "INSTANCE",
        "ROUTE",
        "BOUND",
        "ALLOWED/s",
        "REFUSED/s",
        "SHADOW/s",
        "REFUSED",
        "TRACKED",
        "OVERFLOW",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in &t.bounds {
        table.push(vec![
            r.instance.clone(),
            r.route.clone(),
            r.bound.clone(),
            per_s(r.allowed.per_s),
            per_s(r.refused.per_s),
            per_s(r.would_refuse.per_s),
            crate::console::words::number(r.refused.total),
            r.tracked.map_or("-".into(), |n| {
                format!(
                    "{}/{}",
                    crate::console::words::number(n),
                    crate::console::words::number(t.tracked_cap)
                )
            }),
            r.overflow
                .map_or("-".into(), |o| crate::console::words::number(o.total)),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            table
                .iter()
                .map(|row| row.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (s, w))| {
                if i < 3 {
                    format!("{s:<w$}")
                } else {
                    format!("{s:>w$}")
                }
            })
            .collect();
        lines.push(cells.join("  ").trim_end().to_string());
    }
    if t.bounds.is_empty() {
        lines.push(
            "(no ratebound stats: is the filter loaded, and is this Envoy's admin address?)".into(),
        );
    }
    for i in &t.instances {
        let errors: Vec<String> = ["store_errors", "identity_errors"]
            .iter()
            .filter_map(|k| {
                i.stats
                    .get(*k)
                    .map(|r| format!("{k} {} ({}/s)", r.total, per_s(r.per_s)))
            })
            .collect();
        lines.push(format!("instance {}: {}", i.instance, errors.join(", ")));
    }
    let mut s = String::new();
    for l in lines {
        if width > 0 && l.chars().count() > width {
            s.extend(l.chars().take(width));
        } else {
            s.push_str(&l);
        }
        s.push('\n');
    }
    s
}

/// `http://HOST:PORT` (or `HOST:PORT`) as an address to connect to.
pub fn admin_address(admin: &str) -> Result<String, String> {
    let rest = admin
        .strip_prefix("http://")
        .unwrap_or(admin)
        .trim_end_matches('/');
    if admin.starts_with("https://") || rest.contains('/') || !rest.contains(':') {
        return Err(format!(
            "--admin {admin:?}: give the admin address as http://HOST:PORT"
        ));
    }
    Ok(rest.to_string())
}

/// `GET /stats` from the admin endpoint: a plain HTTP/1.1 request.
pub fn fetch(address: &str, timeout: Duration) -> Result<String, String> {
    let path = "/stats?filter=%5Ewasmcustom%5C.ratebound%5C.";
    let addr = std::net::ToSocketAddrs::to_socket_addrs(address)
        .map_err(|e| format!("{address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot reach the Envoy admin at {address}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    // Bounded: the stats of a few configurations are far below this.
    s.take(64 << 20)
        .read_to_end(&mut raw)
        .map_err(|e| format!("reading {address}: {e}"))?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{address}: not an HTTP answer"))?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200") {
        return Err(format!("{address}: {status}"));
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    Ok(if chunked {
        dechunk(body)
    } else {
        body.to_string()
    })
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else {
            break;
        };
        if n == 0 {
            break;
        }
        let Some(chunk) = rest.get(..n) else {
            out.push_str(rest);
            break;
        };
        out.push_str(chunk);
        body = rest.get(n + 2..).unwrap_or("");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
wasmcustom.ratebound.demo.hello.per_address.allowed: 5
wasmcustom.ratebound.demo.hello.per_address.overflow: 0
wasmcustom.ratebound.demo.hello.per_address.refused: 2
wasmcustom.ratebound.demo.hello.per_address.tracked: 1
wasmcustom.ratebound.demo.hello.per_address.would_refuse: 0
wasmcustom.ratebound.demo.shop.get-item.per_user.allowed: 0
wasmcustom.ratebound.demo.shop.get-item.per_user.refused: 0
wasmcustom.ratebound.demo.store_errors: 0
wasmcustom.ratebound.demo.rls_latency_ms: P0(nan,nan) P25(nan,nan)
";

    #[test]
    fn names_split_from_both_ends_and_rates_come_from_two_samples() {
        let before = parse_stats(BEFORE);
        let after = parse_stats(
            &BEFORE
                .replace("per_address.refused: 2", "per_address.refused: 22")
                .replace("per_address.allowed: 5", "per_address.allowed: 9")
                .replace("per_user.refused: 0", "per_user.refused: 4"),
        );
        let t = compute("http://127.0.0.1:9901", &before, &after, 2.0);
        assert_eq!(t.bounds.len(), 2);
        let top = &t.bounds[0];
        assert_eq!(
            (top.route.as_str(), top.bound.as_str()),
            ("hello", "per_address")
        );
        assert_eq!(
            top.refused,
            Rate {
                total: 22,
                per_s: 10.0
            }
        );
        assert_eq!(top.allowed.per_s, 2.0);
        assert_eq!(top.tracked, Some(1));
        let op = &t.bounds[1];
        assert_eq!(
            (op.route.as_str(), op.bound.as_str()),
            ("shop", "get-item.per_user")
        );
        assert_eq!(op.tracked, None);
        assert_eq!(t.instances[0].stats["store_errors"].total, 0);
        let s = text(&t, 0);
        assert!(s.contains("hello"), "{s}");
        assert!(s.contains("1/10,000"), "{s}");
    }

    #[test]
    fn chunked_bodies_and_addresses() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
        assert_eq!(
            admin_address("http://127.0.0.1:9901/").unwrap(),
            "127.0.0.1:9901"
        );
        assert!(admin_address("https://x:1").is_err());
        assert!(admin_address("127.0.0.1").is_err());
    }
}
