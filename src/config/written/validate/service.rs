//! Installation and fleet bounds and the rate-limit service that counts
//! them (envoyproxy/ratelimit over Redis).
//!
//! The service counts in fixed windows aligned to the clock, one per unit
//! (second, minute, hour, day), with no multiplier: those are the only
//! windows an installation bound may have (a sliding one reads two of
//! them). Compiled, such a bound has no
//! lane: nothing of it lives in shared data.

use super::super::error::{err, ConfigError};
use super::super::names::valid_name;
use super::super::*;

/// A fleet bound's window holds at least this many syncs (docs/fleet.md:
/// fewer admit several times the limit).
const MIN_SYNCS_A_WINDOW: u64 = 10;

/// Problems with installation bounds, the route's `account` and
/// `rate_limit_service`, each with its JSON path.
pub(super) fn validate_bound(
    c: &WrittenConfig,
    route: &RouteConfig,
    b: &BoundConfig,
    window_ms: Option<u64>,
    at: &str,
    errors: &mut Vec<ConfigError>,
) {
    if let Some(shape) = b.shape.filter(|_| b.scope != Scope::Installation) {
        errors.push(err(
            format!("{at}.shape"),
            format!(
                "a {} bound always slides: \"shape\" ({:?}) is an installation bound's \
                 choice; remove it",
                b.scope.as_str(),
                shape.as_str()
            ),
        ));
    }
    if b.scope == Scope::Node {
        if b.per == Per::Account {
            errors.push(err(
                format!("{at}.per"),
                "\"account\" is counted by the rate-limit service, for the whole installation: \
                 add \"scope\": \"installation\" (and a top-level \"rate_limit_service\")",
            ));
        }
        return;
    }
    let scope = b.scope.as_str();
    if c.rate_limit_service.is_none() {
        errors.push(err(
            format!("{at}.scope"),
            format!(
                "a{} {scope} bound is counted by the rate-limit service: add a top-level \
                 \"rate_limit_service\": {{\"cluster\": \"<Envoy cluster, HTTP/2>\", \"domain\": \"<its domain>\"}}",
                if b.scope == Scope::Installation { "n" } else { "" }
            ),
        ));
    }
    if let Some(ms) = window_ms.filter(|ms| Unit::of_ms(*ms).is_none()) {
        let near = Unit::nearest(ms);
        errors.push(err(
            format!("{at}.window"),
            format!(
                "{:?} is not a window the rate-limit service keeps: {scope} bounds count \
                 in its clock windows of PT1S, PT1M, PT1H or P1D; the nearest is {:?} \
                 (scale the limit to it)",
                b.window,
                near.window()
            ),
        ));
    }
    if b.scope == Scope::Fleet {
        let sync_ms = c.rate_limit_service.as_ref().map_or(500, |s| s.sync_ms);
        if let Some(ms) = window_ms.filter(|ms| *ms < MIN_SYNCS_A_WINDOW * sync_ms) {
            errors.push(err(
                format!("{at}.window"),
                format!(
                    "{:?} is too short for a fleet bound synced every {sync_ms} ms: the nodes \
                     see each other's hits a sync or two late, which over a window under \
                     {MIN_SYNCS_A_WINDOW} syncs admits up to 2-3x the limit (docs/fleet.md); \
                     use a longer window, or lower \"rate_limit_service.sync_ms\" to {} or less",
                    b.window,
                    ms / MIN_SYNCS_A_WINDOW
                ),
            ));
        }
        if b.per == Per::Account {
            errors.push(err(
                format!("{at}.per"),
                "\"account\" is counted per request by the rate-limit service: use \
                 \"scope\": \"installation\"",
            ));
        }
    }
    if b.per == Per::Account && route.account.is_none() {
        errors.push(err(
            format!("{at}.per"),
            "\"account\" needs the route to say where sign-in requests name it: \
             \"account\": {\"json\": \"username\"} (or {\"form\": …} or {\"header\": …})",
        ));
    }
}

/// The top-level `rate_limit_service`.
pub(super) fn validate_service(c: &WrittenConfig, errors: &mut Vec<ConfigError>) {
    let Some(s) = &c.rate_limit_service else {
        return;
    };
    let at = "$.rate_limit_service";
    if s.cluster.is_empty() || s.cluster.contains('|') {
        errors.push(err(
            format!("{at}.cluster"),
            format!(
                "{:?} cannot be the cluster of a gRPC call: give the name of an HTTP/2 cluster \
                 without '|' (Istio's outbound|port||host names break the call's :authority; \
                 add a plainly named cluster)",
                s.cluster
            ),
        ));
    }
    if !valid_name(&s.domain) {
        errors.push(err(
            format!("{at}.domain"),
            "must be 1-64 characters of A-Z a-z 0-9 _ - (the service's configuration names it)",
        ));
    }
    if !(1..=10_000).contains(&s.timeout_ms) {
        errors.push(err(
            format!("{at}.timeout_ms"),
            format!(
                "{} is out of range: a request waits 1 to 10000 ms for the service (100 by default)",
                s.timeout_ms
            ),
        ));
    }
    if !(100..=5_000).contains(&s.sync_ms) {
        errors.push(err(
            format!("{at}.sync_ms"),
            format!(
                "{} is out of range: fleet bounds sync every 100 to 5000 ms (500 by default)",
                s.sync_ms
            ),
        ));
    }
    if let Some(n) = s.fleet_nodes.filter(|n| !(1..=10_000).contains(n)) {
        errors.push(err(
            format!("{at}.fleet_nodes"),
            format!(
                "{n} is out of range: assume 1 to 10000 nodes until the service has counted them"
            ),
        ));
    }
    if let Some(k) = &s.key_secret {
        let at = format!("{at}.key_secret");
        validate_key_secret(k, &at, errors);
        if let Some(other) = &k.also_read {
            let at = format!("{at}.also_read");
            validate_key_secret(other, &at, errors);
            if other.also_read.is_some() {
                errors.push(err(
                    format!("{at}.also_read"),
                    "a rotation reads one other secret: remove this one",
                ));
            }
            let same = (other.env.is_some() && other.env == k.env)
                || (other.value.is_some() && other.value == k.value);
            if same {
                errors.push(err(
                    at,
                    "is the secret itself: every count would be read twice; name the other \
                     secret of the rotation (the old one, or the next one), or remove \"also_read\"",
                ));
            }
        }
    }
    let used = c.routes.iter().any(|r| {
        r.bounds
            .iter()
            .chain(r.operations.iter().flat_map(|o| &o.bounds))
            .any(|b| b.scope != Scope::Node)
    });
    if !used {
        errors.push(err(
            at,
            "no bound says \"scope\": \"installation\" or \"fleet\": remove the block, or give \
             a bound one of those scopes",
        ));
    }
}

fn validate_key_secret(k: &KeySecretConfig, at: &str, errors: &mut Vec<ConfigError>) {
    match (&k.env, &k.value) {
        (Some(name), None) => {
            let mut chars = name.chars();
            let ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                errors.push(err(
                    format!("{at}.env"),
                    format!("{name:?} is not an environment variable name; e.g. \"RATEBOUND_KEY_SECRET\""),
                ));
            }
        }
        (None, Some(v)) if v.len() < MIN_SECRET_BYTES => errors.push(err(
            format!("{at}.value"),
            format!(
                "is {} bytes: a key secret has at least {MIN_SECRET_BYTES} (e.g. `openssl rand -hex 16`); \
                 better, name an environment variable with \"env\"",
                v.len()
            ),
        )),
        (None, Some(_)) => {}
        _ => errors.push(err(
            at,
            "give exactly one of \"env\" (an environment variable of the Wasm VM) or \"value\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_secret_is_one_of_env_or_value_and_long_enough() {
        let e = errors(r#","key_secret":{"value":"short"}"#, FLEET);
        assert!(
            e[0].contains("$.rate_limit_service.key_secret.value") && e[0].contains("16"),
            "{e:?}"
        );
        let e = errors(r#","key_secret":{}"#, FLEET);
        assert!(e[0].contains("exactly one"), "{e:?}");
        let e = errors(r#","key_secret":{"env":"1X"}"#, FLEET);
        assert!(e[0].contains(".key_secret.env"), "{e:?}");
        assert_eq!(
            errors(r#","key_secret":{"env":"RB_SECRET"}"#, FLEET),
            Vec::<String>::new()
        );
        let json = format!(
            r#"{{"rate_limit_service":{{"cluster":"rls","domain":"d","key_secret":{{"env":"RB_SECRET"}}}},
            "routes":[{{"name":"r","bounds":[{FLEET}]}}]}}"#
        );
        let c = crate::config::parse(json.as_bytes()).unwrap();
        let got = resolve_key_secret(&c, |n| {
            (n == "RB_SECRET").then(|| "0123456789abcdef".into())
        });
        assert_eq!(got.unwrap(), Some(Secret(b"0123456789abcdef".to_vec())));
        let e = resolve_key_secret(&c, |_| None).unwrap_err().to_string();
        assert!(
            e.contains("$.rate_limit_service.key_secret.env") && e.contains("not set"),
            "{e}"
        );
        let e = resolve_key_secret(&c, |_| Some("x".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 bytes"), "{e}");
        assert!(!format!("{c:?}").contains("0123456789"), "never in Debug");
    }

    const FLEET: &str = r#"{"per":"address","limit":5,"window":"PT1M","scope":"fleet"}"#;

    #[test]
    fn a_shape_is_an_installation_bounds_choice() {
        let shaped = |scope: &str, shape: &str| {
            format!(
                r#"{{"per":"address","limit":5,"window":"PT1M","scope":"{scope}","shape":"{shape}"}}"#
            )
        };
        assert!(errors("", &shaped("installation", "fixed")).is_empty());
        assert!(errors("", &shaped("installation", "sliding")).is_empty());
        for scope in ["node", "fleet"] {
            let e = errors("", &shaped(scope, "fixed"));
            assert!(
                e[0].starts_with("$.routes[0].bounds[0].shape: a ") && e[0].contains("remove it"),
                "{e:?}"
            );
        }
        let e = errors("", &shaped("installation", "rolling"));
        assert!(e[0].contains("shape") || e[0].contains("rolling"), "{e:?}");
    }

    /// The errors of a one-bound configuration, as "path: message".
    fn errors(service: &str, bound: &str) -> Vec<String> {
        let json = format!(
            r#"{{"rate_limit_service":{{"cluster":"rls","domain":"d"{service}}},
            "routes":[{{"name":"r","bounds":[{bound}]}}]}}"#
        );
        match crate::config::parse(json.as_bytes()) {
            Ok(_) => Vec::new(),
            Err(es) => es.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_rotation_reads_one_other_secret_never_the_same() {
        let with = |also: &str| {
            errors(
                &format!(r#","key_secret":{{"env":"RB_NEW","also_read":{also}}}"#),
                FLEET,
            )
        };
        assert_eq!(with(r#"{"env":"RB_OLD"}"#), Vec::<String>::new());
        let e = with(r#"{"env":"RB_NEW"}"#);
        assert!(
            e[0].contains("$.rate_limit_service.key_secret.also_read")
                && e[0].contains("read twice"),
            "{e:?}"
        );
        let e = with(r#"{"env":"RB_OLD","also_read":{"env":"RB_OLDER"}}"#);
        assert!(e[0].contains("also_read.also_read"), "{e:?}");
        let e = with(r#"{"value":"short"}"#);
        assert!(e[0].contains("key_secret.also_read.value"), "{e:?}");
        // Resolved where the filter runs: the same bytes under two names
        // are refused too; a missing variable names its path.
        let c = crate::config::parse(
            br#"{"rate_limit_service":{"cluster":"rls","domain":"d",
                "key_secret":{"env":"RB_NEW","also_read":{"env":"RB_OLD"}}},
               "routes":[{"name":"r","bounds":[{"per":"address","limit":5,"window":"PT1M","scope":"fleet"}]}]}"#,
        )
        .unwrap();
        // As the filter resolves them: the secret, then the other beside it.
        let also = |getenv: &dyn Fn(&str) -> Option<String>| {
            let counted = resolve_key_secret(&c, getenv).unwrap();
            resolve_also_read(&c, counted.as_ref(), getenv)
        };
        let same = |_: &str| Some("0123456789abcdef0".to_string());
        let e = also(&same).unwrap_err().to_string();
        assert!(e.contains("same secret"), "{e}");
        let e = also(&|n: &str| (n == "RB_NEW").then(|| "0123456789abcdef0".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("$.rate_limit_service.key_secret.also_read.env"),
            "{e}"
        );
        let two = |n: &str| Some(format!("{n}-0123456789abcdef"));
        assert_eq!(
            also(&two).unwrap(),
            Some(Secret(b"RB_OLD-0123456789abcdef".to_vec()))
        );
    }

    #[test]
    fn fleet_bounds_take_the_services_windows_at_least_ten_syncs_long() {
        let fleet = |window: &str| {
            format!(r#"{{"per":"address","limit":5,"window":"{window}","scope":"fleet"}}"#)
        };
        assert_eq!(errors("", &fleet("PT1M")), Vec::<String>::new());
        let e = errors("", &fleet("PT30S"));
        assert!(
            e[0].contains("$.routes[0].bounds[0].window") && e[0].contains("PT1M"),
            "{e:?}"
        );
        let e = errors(r#","sync_ms":200"#, &fleet("PT1S"));
        assert!(
            e[0].contains("too short") && e[0].contains("100 or less"),
            "{e:?}"
        );
        assert_eq!(
            errors(r#","sync_ms":100"#, &fleet("PT1S")),
            Vec::<String>::new()
        );
        let e = errors(r#","sync_ms":50"#, &fleet("PT1H"));
        assert!(e[0].contains("$.rate_limit_service.sync_ms"), "{e:?}");
        let e = errors(r#","fleet_nodes":0"#, &fleet("PT1H"));
        assert!(e[0].contains("$.rate_limit_service.fleet_nodes"), "{e:?}");
        let account = r#"{"per":"account","limit":5,"window":"PT1M","scope":"fleet"}"#;
        assert!(errors("", account)
            .iter()
            .any(|e| e.contains("use \"scope\": \"installation\"")));
    }
}
