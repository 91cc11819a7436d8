//! `ratebound top`: what a running Envoy is admitting and refusing, from its
//! admin endpoint's `/stats`, per instance, route and bound, as rates over
//! two samples.
//!
//! Names are split with [`ratebound::stats`], which the filter names them with.

use ratebound::stats::{self, Stat};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// How many callers a keyed bound tracks at most (the `tracked` gauge's cap).
pub const TRACKED_CAP: u64 = ratebound::count::lane::Table::DEFAULT.cap as u64;

/// One reading of `/stats`: every ratebound stat by name.
pub type Sample = BTreeMap<String, u64>;

/// The ratebound stats of `/stats` text (`name: value` lines; histograms
/// and anything else are skipped).
pub fn parse_stats(text: &str) -> Sample {
    text.lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(": ")?;
            let name = name.trim();
            name.starts_with(stats::ENVOY_PREFIX)
                .then_some(())
                .and_then(|()| value.trim().parse::<u64>().ok())
                .map(|v| (name.to_string(), v))
        })
        .collect()
}

/// A counter: its total and its rate over the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CounterRate {
    pub total: u64,
    pub per_s: f64,
}

/// One bound of one route.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub instance: String,
    pub route: String,
    pub bound: String,
    pub allowed: CounterRate,
    pub refused: CounterRate,
    pub would_refuse: CounterRate,
    /// Callers that could not be tracked because the table was full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overflow: Option<CounterRate>,
    /// Callers tracked now (a node bound keyed per caller), of [`TRACKED_CAP`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracked: Option<u64>,
    /// Calls to and errors of the rate-limit service (installation bounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rls_calls: Option<CounterRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rls_errors: Option<CounterRate>,
}

/// One instance's own stats (store_errors, identity_errors, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    pub instance: String,
    pub stats: BTreeMap<String, CounterRate>,
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

fn rate(before: &Sample, after: &Sample, name: &str, seconds: f64) -> Option<CounterRate> {
    let total = *after.get(name)?;
    let was = before.get(name).copied().unwrap_or(total);
    // A counter that went down was reset (Envoy restarted): rate from 0.
    let delta = if total >= was { total - was } else { total };
    let per_s = if seconds > 0.0 {
        delta as f64 / seconds
    } else {
        0.0
    };
    Some(CounterRate { total, per_s })
}

/// The rows of two samples `seconds` apart.
pub fn compute(admin: &str, before: &Sample, after: &Sample, seconds: f64) -> Top {
    // Each bound's stats: their full names, by stat.
    type Names<'a> = BTreeMap<&'a str, &'a str>;
    let mut rows: BTreeMap<(String, String, String), Names<'_>> = BTreeMap::new();
    let mut instances: BTreeMap<String, BTreeMap<String, CounterRate>> = BTreeMap::new();
    for name in after.keys() {
        let Some(n) = stats::split(name) else {
            continue;
        };
        match n.bound {
            Some((route, bound)) => {
                rows.entry((n.instance.into(), route.into(), bound.into()))
                    .or_default()
                    .insert(n.stat, name);
            }
            None => {
                if let Some(r) = rate(before, after, name, seconds) {
                    instances
                        .entry(n.instance.to_string())
                        .or_default()
                        .insert(n.stat.to_string(), r);
                }
            }
        }
    }
    let mut bounds: Vec<Row> = rows
        .into_iter()
        .map(|((instance, route, bound), names)| {
            let name = |stat: Stat| names.get(stat.name()).copied();
            let r = |stat: Stat| name(stat).and_then(|n| rate(before, after, n, seconds));
            Row {
                allowed: r(Stat::Allowed).unwrap_or_default(),
                refused: r(Stat::Refused).unwrap_or_default(),
                would_refuse: r(Stat::WouldRefuse).unwrap_or_default(),
                overflow: r(Stat::Overflow),
                tracked: name(Stat::Tracked).and_then(|n| after.get(n).copied()),
                rls_calls: r(Stat::RlsCalls),
                rls_errors: r(Stat::RlsErrors),
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
            ratebound::reading::words::number(r.refused.total),
            r.tracked.map_or("-".into(), |n| {
                format!(
                    "{}/{}",
                    ratebound::reading::words::number(n),
                    ratebound::reading::words::number(t.tracked_cap)
                )
            }),
            r.overflow
                .map_or("-".into(), |o| ratebound::reading::words::number(o.total)),
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
        let errors: Vec<String> = [Stat::StoreErrors, Stat::IdentityErrors]
            .iter()
            .map(|s| s.name())
            .filter_map(|k| {
                i.stats
                    .get(k)
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

/// `GET /stats` from the admin endpoint, only ratebound's: plain HTTP to
/// a local address, every connect, read and write within `timeout`.
pub fn fetch(address: &str, timeout: Duration) -> Result<String, String> {
    // The filter is a regex: `^wasmcustom\.ratebound\.`, percent-encoded.
    let filter = format!("%5E{}", stats::ENVOY_PREFIX.replace('.', "%5C."));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        // HTTP_PROXY and the like are for the outside: the admin is local.
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_connect(Some(timeout))
        .timeout_per_read(Some(timeout))
        .timeout_per_write(Some(timeout))
        .build()
        .into();
    let mut answer = agent
        .get(format!("http://{address}/stats?filter={filter}"))
        .header("Accept", "text/plain")
        .call()
        .map_err(|e| match e {
            ureq::Error::Protocol(_) => format!("{address}: not an HTTP answer ({e})"),
            _ => format!("cannot reach the Envoy admin at {address}: {e}"),
        })?;
    let status = answer.status();
    if status != ureq::http::StatusCode::OK {
        return Err(format!("{address}: HTTP {status}"));
    }
    answer
        .body_mut()
        .with_config()
        // Bounded: the stats of a few configurations are far below this.
        .limit(64 << 20)
        .read_to_string()
        .map_err(|e| format!("reading {address}: {e}"))
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
            CounterRate {
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
    fn addresses() {
        assert_eq!(
            admin_address("http://127.0.0.1:9901/").unwrap(),
            "127.0.0.1:9901"
        );
        assert!(admin_address("https://x:1").is_err());
        assert!(admin_address("127.0.0.1").is_err());
    }

    /// A one-answer HTTP server on a free local port: its address, and the
    /// request it was sent (once `fetch` is done).
    fn serve(answer: &'static [u8]) -> (String, std::thread::JoinHandle<String>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            s.write_all(answer).unwrap();
            String::from_utf8(request).unwrap()
        });
        (address, server)
    }

    #[test]
    fn fetch_asks_for_ratebound_stats_and_reads_chunked_answers() {
        let (address, server) = serve(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        );
        let body = fetch(&address, Duration::from_secs(5)).unwrap();
        assert_eq!(body, "hello world");
        let request = server.join().unwrap();
        assert!(
            request.starts_with("GET /stats?filter=%5Ewasmcustom%5C.ratebound%5C. HTTP/1.1\r\n"),
            "{request}"
        );
    }

    #[test]
    fn fetch_errors_say_what_went_wrong() {
        let (address, server) =
            serve(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
        let e = fetch(&address, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e, format!("{address}: HTTP 503 Service Unavailable"));
        server.join().unwrap();

        let (address, server) = serve(b"SSH-2.0-OpenSSH\r\n\r\n");
        let e = fetch(&address, Duration::from_secs(5)).unwrap_err();
        assert!(
            e.starts_with(&format!("{address}: not an HTTP answer")),
            "{e}"
        );
        server.join().unwrap();

        // An admin that takes the request and never answers: the read
        // timeout ends the wait.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = silent.local_addr().unwrap().to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        let asked = address.clone();
        std::thread::spawn(move || tx.send(fetch(&asked, Duration::from_millis(200))));
        // A failure, not a hang, if the timeout is lost.
        let e = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("fetch still waiting 5 s after a 200 ms timeout")
            .unwrap_err();
        assert!(e.contains(&address), "{e}");
        drop(silent);

        // Nobody listens on a port just let go of.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = free.local_addr().unwrap().to_string();
        drop(free);
        let e = fetch(&address, Duration::from_secs(5)).unwrap_err();
        assert!(
            e.starts_with(&format!("cannot reach the Envoy admin at {address}")),
            "{e}"
        );
    }
}
