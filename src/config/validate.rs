//! [`parse`]: the configuration text to a [`Config`], or every problem
//! found, each with its JSON path and what would be valid.

use super::error::{err, ConfigError};
use super::installation;
use super::model::*;
use super::names::{is_header_name, valid_name};

/// Parses and validates a JSON configuration. Returns every error found.
pub fn parse(bytes: &[u8]) -> Result<Config, Vec<ConfigError>> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(vec![err(
            "$",
            format!(
                "configuration is {} bytes; at most {MAX_CONFIG_BYTES} are accepted",
                bytes.len()
            ),
        )]);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        vec![err(
            "$",
            format!("configuration is not UTF-8 (byte {})", e.valid_up_to()),
        )]
    })?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    let mut de = serde_json::Deserializer::from_str(text);
    let config: Config = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = json_path(&e.path().to_string());
        // serde_json's message ends with "at line L column C": kept, it helps in big files.
        vec![err(path, e.inner().to_string())]
    })?;
    de.end()
        .map_err(|e| vec![err("$", format!("trailing characters: {e}"))])?;
    let errors = validate(&config);
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(errors)
    }
}

fn json_path(serde_path: &str) -> String {
    if serde_path == "." || serde_path.is_empty() {
        "$".to_string()
    } else if serde_path.starts_with('[') {
        format!("${serde_path}")
    } else {
        format!("$.{serde_path}")
    }
}

fn validate(c: &Config) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    if !valid_name(&c.instance) {
        errors.push(err(
            "$.instance",
            "must be 1-64 characters of A-Z a-z 0-9 _ - (it prefixes shared-data keys and stats)",
        ));
    }
    let a = &c.client_address;
    if !(1..=32).contains(&a.ipv4_prefix) {
        errors.push(err(
            "$.client_address.ipv4_prefix",
            format!(
                "{} is out of range: give 1 to 32 leading bits (32 counts each IPv4 address)",
                a.ipv4_prefix
            ),
        ));
    }
    if !(1..=128).contains(&a.ipv6_prefix) {
        errors.push(err(
            "$.client_address.ipv6_prefix",
            format!("{} is out of range: give 1 to 128 leading bits (64, the default, counts each /64 network; 128 each address)", a.ipv6_prefix),
        ));
    }
    if let Some(id) = &c.identity {
        validate_identity(id, &mut errors);
    }
    validate_enforcement(c.enforce_percent, c.shadow, "$", &mut errors);
    if let Some(h) = c
        .would_refuse_header
        .as_deref()
        .filter(|h| !is_header_name(h))
    {
        errors.push(err(
            "$.would_refuse_header",
            format!(
                "{h:?} is not a lowercase request header name; e.g. \"x-ratebound-would-refuse\""
            ),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, r) in c.routes.iter().enumerate() {
        let at = format!("$.routes[{i}]");
        if !valid_name(&r.name) {
            errors.push(err(
                format!("{at}.name"),
                "must be 1-64 characters of A-Z a-z 0-9 _ - (it names stats)",
            ));
        } else if !seen.insert(r.name.as_str()) {
            errors.push(err(
                format!("{at}.name"),
                format!(
                    "duplicate route name {:?}; route names must be unique",
                    r.name
                ),
            ));
        }
        validate_match(&r.matching, &format!("{at}.match"), &mut errors);
        if let Some(a) = &r.account {
            installation::validate_account(a, &format!("{at}.account"), &mut errors);
        }
        validate_bounds(c, r, &r.bounds, &format!("{at}.bounds"), &mut errors);
        validate_operations(c, r, &at, &mut errors);
    }
    installation::validate_service(c, &mut errors);
    validate_budget(c, &mut errors);
    errors
}

/// Node and fleet bounds of every route and operation: (keyed per caller,
/// per route). Installation bounds keep nothing in shared data.
pub fn bound_kinds(c: &Config) -> (usize, usize) {
    let bounds = c.routes.iter().flat_map(|r| {
        r.bounds
            .iter()
            .chain(r.operations.iter().flat_map(|o| &o.bounds))
            .filter(|b| b.scope.in_shared_data())
    });
    let singles = bounds.clone().filter(|b| b.per == Per::Route).count();
    (bounds.count() - singles, singles)
}

/// The configuration fits the shared-data budget (`crate::count::budget`).
fn validate_budget(c: &Config, errors: &mut Vec<ConfigError>) {
    use crate::count::budget::{keys_of, CONFIG_BOUNDS, CONFIG_KEYS, TABLE_KEYS};
    let (tables, singles) = bound_kinds(c);
    if tables + singles > CONFIG_BOUNDS {
        errors.push(err(
            "$.routes",
            format!(
                "{} bounds (operations' included); at most {CONFIG_BOUNDS} fit in one \
                 configuration: split the routes across instances or remove bounds",
                tables + singles
            ),
        ));
    }
    let keys = keys_of(tables, singles);
    if keys > CONFIG_KEYS {
        errors.push(err(
            "$.routes",
            format!(
                "{tables} bounds keyed per caller need {keys} shared-data keys \
                 ({TABLE_KEYS} each, to track up to {} callers); the budget is \
                 {CONFIG_KEYS} keys a configuration ({} keyed bounds): key some \
                 bounds per route, or remove some",
                super::error::number(u64::from(crate::count::lane::Table::DEFAULT.cap)),
                CONFIG_KEYS / TABLE_KEYS
            ),
        ));
    }
}

fn validate_bounds(
    c: &Config,
    route: &RouteConfig,
    bounds: &[BoundConfig],
    at: &str,
    errors: &mut Vec<ConfigError>,
) {
    let mut names = std::collections::HashSet::new();
    for (j, b) in bounds.iter().enumerate() {
        let bt = format!("{at}[{j}]");
        if let Some(name) = &b.name {
            if !valid_name(name) {
                errors.push(err(
                    format!("{bt}.name"),
                    "must be 1-64 characters of A-Z a-z 0-9 _ -",
                ));
            }
        }
        let name = bound_name(b, j);
        if !names.insert(name.clone()) {
            errors.push(err(
                format!("{bt}.name"),
                format!("duplicate bound name {name:?} here"),
            ));
        }
        if b.limit == 0 || b.limit > u64::from(u32::MAX) {
            errors.push(err(
                format!("{bt}.limit"),
                format!(
                    "{} is out of range: a limit is a whole number from 1 to {}",
                    b.limit,
                    u32::MAX
                ),
            ));
        }
        let ms = window_ms(&b.window);
        if let Err(e) = &ms {
            errors.push(err(format!("{bt}.window"), e.to_string()));
        }
        installation::validate_bound(c, route, b, ms.ok(), &bt, errors);
        validate_identity_needs(c.identity.as_ref(), b, &bt, errors);
        validate_enforcement(b.enforce_percent, b.shadow, &bt, errors);
        super::cost::validate(b, &bt, errors);
        if b.per == crate::config::Per::Model && !reads_its_answers_json(route) {
            errors.push(err(
                format!("{bt}.per"),
                "\"model\" is read from the request body of a route whose cost its answer's JSON \
                 names: give a bound of the route \"cost\": {\"response_json\": \
                 \"/usage/total_tokens\"} (or \"input_json\" and \"output_json\")",
            ));
        }
    }
}

/// A bound of `route` (or of its operations) reads its cost in the
/// answer's JSON: its requests' bodies are read first.
fn reads_its_answers_json(route: &RouteConfig) -> bool {
    route
        .bounds
        .iter()
        .chain(route.operations.iter().flat_map(|o| o.bounds.iter()))
        .filter_map(|b| b.cost.as_ref())
        .any(|c| c.response_json.is_some() || c.output_json.is_some())
}

/// `enforce_percent` (of the configuration or a bound at `at`): a share,
/// and not beside `shadow`, which already enforces none.
fn validate_enforcement(
    percent: Option<u32>,
    shadow: bool,
    at: &str,
    errors: &mut Vec<ConfigError>,
) {
    let Some(p) = percent else {
        return;
    };
    if p > 100 {
        errors.push(err(
            format!("{at}.enforce_percent"),
            format!(
                "{p} is out of range: carry out 0 to 100 percent of the refusals (100 by default)"
            ),
        ));
    } else if shadow {
        errors.push(err(
            format!("{at}.enforce_percent"),
            "\"shadow\": true already carries out none of the refusals: give one of the two \
             (\"enforce_percent\": 0 spares every refusal as a shadow bound does, and raising it \
             later keeps the bound's counts; turning \"shadow\" off starts them again)",
        ));
    }
}

/// An operation's stat name: its own, its operationId, or its position.
pub fn operation_name(o: &OperationConfig, index: usize) -> String {
    o.name
        .clone()
        .or_else(|| o.operation_id.clone())
        .unwrap_or_else(|| format!("op{index}"))
}

fn validate_operations(c: &Config, r: &RouteConfig, at: &str, errors: &mut Vec<ConfigError>) {
    let mut names = std::collections::HashSet::new();
    let mut items = std::collections::HashSet::new();
    for (k, o) in r.operations.iter().enumerate() {
        let ot = format!("{at}.operations[{k}]");
        let name = operation_name(o, k);
        if !valid_name(&name) {
            errors.push(err(
                if o.name.is_some() { format!("{ot}.name") } else { format!("{ot}.operation_id") },
                format!("{name:?} cannot name stats (1-64 characters of A-Z a-z 0-9 _ -); give the operation a \"name\""),
            ));
        } else if !names.insert(name.clone()) {
            errors.push(err(
                format!("{ot}.name"),
                format!("duplicate operation name {name:?} in this route"),
            ));
        }
        if o.method.is_empty() || !o.method.bytes().all(|b| b.is_ascii_uppercase()) {
            errors.push(err(
                format!("{ot}.method"),
                format!(
                    "{:?} is not an HTTP method; write it in capitals, e.g. \"POST\"",
                    o.method
                ),
            ));
        }
        match crate::config::operations::parse_template(&o.path) {
            Err(m) => errors.push(err(format!("{ot}.path"), m)),
            Ok(segments) => {
                if !items.insert((o.method.clone(), segments)) {
                    errors.push(err(
                        format!("{ot}.path"),
                        format!("{} {} is listed twice in this route (parameter names do not make templates different)", o.method, o.path),
                    ));
                }
            }
        }
        if o.bounds.is_empty() {
            errors.push(err(
                format!("{ot}.bounds"),
                "lists no bounds; an operation is listed only to carry bounds of its own",
            ));
        }
        validate_bounds(c, r, &o.bounds, &format!("{ot}.bounds"), errors);
    }
}

/// An RFC 6265 cookie name (an RFC 7230 token).
fn is_cookie_name(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A configured host or authority that can never be an `:authority`.
fn authority_error(v: &str, path: String, any_port: &str) -> Option<ConfigError> {
    use crate::config::normalize::{check_authority, AuthorityError};
    let message = match check_authority(v).err()? {
        AuthorityError::Name => format!(
            "{v:?} is not a host name (letters, digits, '-', '.', or an IPv6 address in brackets) with at most a \":port\"; write e.g. \"api.example.com\" or \"api.example.com:8443\""
        ),
        AuthorityError::Port(p) => {
            let name = v.strip_suffix(p.as_str()).unwrap_or(v).trim_end_matches(':');
            format!(
                "{v:?} has port {p:?}, not a port number from 1 to 65535; write e.g. \"{name}:8443\", or \"{name}\" {any_port}"
            )
        }
    };
    Some(err(path, message))
}

fn validate_identity(id: &IdentityConfig, errors: &mut Vec<ConfigError>) {
    let at = "$.identity";
    if id.jwt.is_none() && id.mtls.is_none() && id.header.is_none() && id.session.is_none() {
        errors.push(err(
            at,
            "names no source; give at least one of \"jwt\", \"mtls\", \"header\", \"session\"",
        ));
    }
    if let Some(j) = &id.jwt {
        let claims = [
            ("metadata_key", Some(&j.metadata_key)),
            ("user_claim", Some(&j.user_claim)),
            ("org_claim", j.org_claim.as_ref()),
            ("roles_claim", j.roles_claim.as_ref()),
            ("token_claim", j.token_claim.as_ref()),
        ];
        for (field, value) in claims {
            if value.is_some_and(|v| v.is_empty() || v.split('.').any(str::is_empty)) {
                errors.push(err(
                    format!("{at}.jwt.{field}"),
                    "must be a claim name, dotted for nested claims (e.g. \"realm_access.roles\")",
                ));
            }
        }
        if !is_header_name(&j.token_header) {
            errors.push(err(
                format!("{at}.jwt.token_header"),
                format!(
                    "{:?} is not a header name; write it in lower case, e.g. \"authorization\"",
                    j.token_header
                ),
            ));
        }
        if j.cache_ttl_s > 3_600 {
            errors.push(err(
                format!("{at}.jwt.cache_ttl_s"),
                "must be 0 (no cache) to 3600 seconds",
            ));
        }
        if !(1..=100_000).contains(&j.cache_entries) {
            errors.push(err(
                format!("{at}.jwt.cache_entries"),
                "must be 1 to 100000",
            ));
        }
    }
    if let Some(h) = &id.header {
        let names = [
            ("user", &h.user),
            ("org", &h.org),
            ("roles", &h.roles),
            ("token", &h.token),
        ];
        if names.iter().all(|(_, v)| v.is_none()) {
            errors.push(err(
                format!("{at}.header"),
                "names no header; set user, org, roles or token",
            ));
        }
        for (field, value) in names {
            if let Some(v) = value {
                if !is_header_name(v) {
                    errors.push(err(
                        format!("{at}.header.{field}"),
                        format!("{v:?} is not a header name; write it in lower case, e.g. \"x-user-id\""),
                    ));
                }
            }
        }
    }
    if let Some(sess) = &id.session {
        let st = format!("{at}.session");
        if sess.cluster.is_empty() {
            errors.push(err(
                format!("{st}.cluster"),
                "must name the Envoy cluster of the session service",
            ));
        }
        if !sess.path.starts_with('/') {
            errors.push(err(
                format!("{st}.path"),
                format!("{:?} must start with '/'", sess.path),
            ));
        }
        if let Some(a) = &sess.authority {
            errors.extend(authority_error(
                a,
                format!("{st}.authority"),
                "for the default port",
            ));
        }
        if let Some(c) = sess.cookie.as_ref().filter(|c| !is_cookie_name(c)) {
            // The name is what comes before the first character a token cannot hold.
            let head: String = c
                .chars()
                .take_while(|ch| is_cookie_name(&ch.to_string()))
                .collect();
            let name = if head.is_empty() {
                "sid"
            } else {
                head.as_str()
            };
            errors.push(err(
                format!("{st}.cookie"),
                format!("{c:?} is not a cookie name (an RFC 6265 token: letters, digits and !#$%&'*+-.^_`|~; no spaces, control characters, quotes, backslashes or ()<>@,;:/[]?={{}}); write the name alone, e.g. {name:?}"),
            ));
        }
        if sess.cookie.is_none() && !sess.authorization {
            errors.push(err(
                st.clone(),
                "forwards no credential; set \"cookie\" or leave \"authorization\" true",
            ));
        }
        if !(1..=10_000).contains(&sess.timeout_ms) {
            errors.push(err(
                format!("{st}.timeout_ms"),
                "must be 1 to 10000 milliseconds",
            ));
        }
        if sess.cache_ttl_s > 3_600 {
            errors.push(err(
                format!("{st}.cache_ttl_s"),
                "must be 0 (no cache) to 3600 seconds",
            ));
        }
        if !(1..=100_000).contains(&sess.cache_entries) {
            errors.push(err(format!("{st}.cache_entries"), "must be 1 to 100000"));
        }
    }
}

/// A bound keyed on, or narrowed by, identity needs a source that gives it.
fn validate_identity_needs(
    id: Option<&IdentityConfig>,
    b: &BoundConfig,
    at: &str,
    errors: &mut Vec<ConfigError>,
) {
    let Some(id) = id else {
        if b.needs_identity() {
            errors.push(err(
                if b.applies_to.is_everybody() { format!("{at}.per") } else { format!("{at}.applies_to") },
                "needs a caller identity, and \"identity\" configures no source; add \"identity\" (jwt, mtls, header or session) or use per \"route\"/\"address\" for everybody",
            ));
        }
        return;
    };
    let session = id.session.is_some();
    let jwt = id.jwt.as_ref();
    let header = id.header.as_ref();
    let gives_org = session
        || jwt.is_some_and(|j| j.org_claim.is_some())
        || header.is_some_and(|h| h.org.is_some())
        || id.mtls.as_ref().is_some_and(|m| m.org_from_namespace);
    let gives_token = session
        || jwt.is_some_and(|j| j.token_claim.is_some())
        || header.is_some_and(|h| h.token.is_some());
    let gives_roles = session
        || jwt.is_some_and(|j| j.roles_claim.is_some())
        || header.is_some_and(|h| h.roles.is_some());
    if b.per == Per::Org && !gives_org {
        errors.push(err(
            format!("{at}.per"),
            "per \"org\" needs an organisation: set identity.jwt.org_claim, identity.header.org, identity.mtls.org_from_namespace or identity.session",
        ));
    }
    if b.per == Per::Token && !gives_token {
        errors.push(err(
            format!("{at}.per"),
            "per \"token\" needs a token id: set identity.jwt.token_claim, identity.header.token or identity.session",
        ));
    }
    let a = &b.applies_to;
    if !a.roles.is_empty() && !gives_roles {
        errors.push(err(
            format!("{at}.applies_to.roles"),
            "no identity source gives roles: set identity.jwt.roles_claim, identity.header.roles or identity.session",
        ));
    }
    if !a.orgs.is_empty() && !gives_org {
        errors.push(err(
            format!("{at}.applies_to.orgs"),
            "no identity source gives an organisation: set identity.jwt.org_claim, identity.header.org, identity.mtls.org_from_namespace or identity.session",
        ));
    }
    for (k, v) in a.roles.iter().chain(a.orgs.iter()).enumerate() {
        if v.is_empty() {
            errors.push(err(
                format!("{at}.applies_to"),
                format!("grant {k} is empty"),
            ));
        }
    }
}

fn validate_match(m: &MatchConfig, at: &str, errors: &mut Vec<ConfigError>) {
    if let Some(p) = &m.path_prefix {
        if !p.starts_with('/') {
            errors.push(err(
                format!("{at}.path_prefix"),
                format!("{p:?} must start with '/'"),
            ));
        } else if let Some((path, _)) = p.split_once('?') {
            errors.push(err(
                format!("{at}.path_prefix"),
                format!("{p:?} holds a query ('?'), which is cut before matching: no request would ever match; write the path alone, {path:?}"),
            ));
        } else if let Some((path, _)) = p.split_once('#') {
            errors.push(err(
                format!("{at}.path_prefix"),
                format!("{p:?} holds a fragment ('#'), which clients never send: no request would ever match; write the path alone, {path:?}"),
            ));
        }
    }
    if let Some(n) = &m.route_name {
        if n.is_empty() {
            errors.push(err(
                format!("{at}.route_name"),
                "must not be empty (omit it to match any Envoy route)",
            ));
        }
    }
    if let Some(h) = &m.host {
        if h.is_empty() {
            errors.push(err(
                format!("{at}.host"),
                "must not be empty (omit it to match any host)",
            ));
        } else {
            errors.extend(authority_error(h, format!("{at}.host"), "for any port"));
        }
    }
    for (k, meth) in m.methods.iter().enumerate() {
        if meth.is_empty() || !meth.bytes().all(|b| b.is_ascii_uppercase()) {
            errors.push(err(
                format!("{at}.methods[{k}]"),
                format!("{meth:?} is not an HTTP method; write it in capitals, e.g. \"GET\""),
            ));
        }
    }
}

/// A bound's name: its own, or its position (`b0`, `b1`, …).
pub fn bound_name(b: &BoundConfig, index: usize) -> String {
    b.name.clone().unwrap_or_else(|| format!("b{index}"))
}

/// Milliseconds of a window: an ISO-8601 duration of whole seconds from
/// `PT1S` to `P1D` ([`crate::config::duration`] says exactly which spellings).
pub fn window_ms(s: &str) -> Result<u64, crate::config::duration::WindowError> {
    crate::config::duration::window_ms(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(json: &str) -> Vec<String> {
        match parse(json.as_bytes()) {
            Ok(_) => vec![],
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    /// `e` is one error, at `at` (a JSON path; `what` names the case).
    fn one_error_at(e: &[String], at: &str, what: &str) {
        assert!(e.len() == 1 && e[0].starts_with(at), "{what}: {e:?}");
    }

    const GOOD: &str = r#"{"routes":[{"name":"hello","match":{"path_prefix":"/hello","methods":["GET"]},
        "bounds":[{"per":"address","limit":5,"window":"PT1M"}]}]}"#;

    #[test]
    fn good_config_parses_with_defaults() {
        let c = parse(GOOD.as_bytes()).unwrap();
        assert_eq!(c.instance, "ratebound");
        assert!(c.success_headers);
        assert_eq!(c.routes[0].bounds[0].limit, 5);
    }

    #[test]
    fn enforce_percent_is_a_share_and_never_beside_shadow() {
        let e = errors(
            r#"{"enforce_percent":101,"would_refuse_header":"X Bad","routes":[{"name":"a","bounds":[
            {"per":"address","limit":5,"window":"PT1M","enforce_percent":250},
            {"per":"route","limit":5,"window":"PT1M","shadow":true,"enforce_percent":0}]}]}"#,
        );
        assert!(
            e[0].starts_with("$.enforce_percent: 101 is out of range"),
            "{e:?}"
        );
        assert!(
            e[1].starts_with("$.would_refuse_header: \"X Bad\""),
            "{e:?}"
        );
        assert!(
            e[2].starts_with("$.routes[0].bounds[0].enforce_percent: 250"),
            "{e:?}"
        );
        assert!(
            e[3].starts_with("$.routes[0].bounds[1].enforce_percent: \"shadow\": true"),
            "{e:?}"
        );
        assert_eq!(e.len(), 4);
        assert!(errors(
            r#"{"enforce_percent":10,"routes":[{"name":"a","bounds":[
            {"per":"address","limit":5,"window":"PT1M","enforce_percent":0}]}]}"#
        )
        .is_empty());
    }

    #[test]
    fn empty_configuration_is_an_empty_plan() {
        assert_eq!(parse(b"").unwrap().routes.len(), 0);
    }

    #[test]
    fn windows_outside_one_second_to_one_day_are_rejected() {
        assert_eq!(window_ms("PT1S"), Ok(1_000));
        assert_eq!(window_ms("P1D"), Ok(86_400_000));
        assert_eq!(window_ms("PT1M30S"), Ok(90_000));
        for bad in [
            "PT0S", "PT0.5S", "P2D", "P1M", "P1Y", "1m", "", "PT", "P0YT1S", "P0MT1M",
        ] {
            assert!(window_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_error_names_its_json_path() {
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":0,"window":"PT0S"}]},
                          {"name":"a","match":{"path_prefix":"x","methods":["get"]}}]}"#,
        );
        let want = [
            "$.routes[0].bounds[0].limit",
            "$.routes[0].bounds[0].window",
            "$.routes[1].name: duplicate",
            "$.routes[1].match.path_prefix",
            "$.routes[1].match.methods[0]",
        ];
        for w in want {
            assert!(e.iter().any(|m| m.starts_with(w)), "missing {w} in {e:?}");
        }
        assert_eq!(e.len(), want.len(), "{e:?}");
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_rejected_with_a_path() {
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":5,"window":"PT1S","burst":3}]}]}"#,
        );
        assert!(e[0].starts_with("$.routes[0].bounds[0]"), "{e:?}");
        assert!(e[0].contains("unknown field `burst`"), "{e:?}");
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"ip","limit":5,"window":"PT1S"}]}]}"#,
        );
        assert!(e[0].starts_with("$.routes[0].bounds[0].per"), "{e:?}");
        let e = errors(r#"{"routes":{"name":"a"}}"#);
        assert!(e[0].starts_with("$.routes"), "{e:?}");
    }

    #[test]
    fn client_address_prefixes_default_and_are_range_checked_with_a_path() {
        let c = parse(GOOD.as_bytes()).unwrap();
        assert_eq!(
            (c.client_address.ipv4_prefix, c.client_address.ipv6_prefix),
            (32, 64)
        );
        let e = errors(r#"{"client_address":{"ipv4_prefix":0,"ipv6_prefix":129}}"#);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("$.client_address.ipv4_prefix: "), "{e:?}");
        assert!(e[0].contains("1 to 32"), "{e:?}");
        assert!(e[1].starts_with("$.client_address.ipv6_prefix: "), "{e:?}");
        assert!(e[1].contains("1 to 128"), "{e:?}");
        let e = errors(r#"{"client_address":{"ipv6_prefix":"64"}}"#);
        assert!(e[0].starts_with("$.client_address.ipv6_prefix: "), "{e:?}");
        let e = errors(r#"{"client_address":{"ipv6":64}}"#);
        assert!(e[0].starts_with("$.client_address"), "{e:?}");
    }

    #[test]
    fn identity_keyed_bounds_need_an_identity_source() {
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"user","limit":5,"window":"PT1S"}]}]}"#,
        );
        assert!(e[0].starts_with("$.routes[0].bounds[0].per"), "{e:?}");
    }

    #[test]
    fn configurations_that_cannot_work_are_rejected_with_the_fix() {
        let route = |m: &str| format!(r#"{{"routes":[{{"name":"a","match":{m}}}]}}"#);
        let session =
            |s: &str| format!(r#"{{"identity":{{"session":{{"cluster":"s",{s}}}}},"routes":[]}}"#);
        let cases = [
            (
                route(r#"{"path_prefix":"/a?b=1"}"#),
                "$.routes[0].match.path_prefix",
                "query",
            ),
            (
                route(r#"{"path_prefix":"/a#top"}"#),
                "$.routes[0].match.path_prefix",
                "fragment",
            ),
            (
                route(r#"{"host":"example.com:http"}"#),
                "$.routes[0].match.host",
                "port",
            ),
            (
                route(r#"{"host":"example.com:"}"#),
                "$.routes[0].match.host",
                "port",
            ),
            (
                route(r#"{"host":"example.com:0"}"#),
                "$.routes[0].match.host",
                "port",
            ),
            (
                route(r#"{"host":"example.com:65536"}"#),
                "$.routes[0].match.host",
                "port",
            ),
            (
                route(r#"{"host":"example.com:+80"}"#),
                "$.routes[0].match.host",
                "port",
            ),
            (
                route(r#"{"host":"exa mple.com"}"#),
                "$.routes[0].match.host",
                "host name",
            ),
            (
                route(r#"{"host":"example.com/api"}"#),
                "$.routes[0].match.host",
                "host name",
            ),
            (
                route(r#"{"host":":8080"}"#),
                "$.routes[0].match.host",
                "host name",
            ),
            (
                route(r#"{"host":"[::1"}"#),
                "$.routes[0].match.host",
                "host name",
            ),
            (
                route(r#"{"host":"[::g]"}"#),
                "$.routes[0].match.host",
                "host name",
            ),
            (
                session(r#""authority":"session\r\nx-injected: 1""#),
                "$.identity.session.authority",
                "host name",
            ),
            (
                session(r#""authority":"session internal""#),
                "$.identity.session.authority",
                "host name",
            ),
            (
                session(r#""authority":"session\u007f""#),
                "$.identity.session.authority",
                "host name",
            ),
            (
                session(r#""authority":"session:99999""#),
                "$.identity.session.authority",
                "port",
            ),
            (
                session(r#""authority":"""#),
                "$.identity.session.authority",
                "host name",
            ),
            (
                session(r#""cookie":"sid;admin=1""#),
                "$.identity.session.cookie",
                "token",
            ),
            (
                session(r#""cookie":"sid=1""#),
                "$.identity.session.cookie",
                "token",
            ),
            (
                session(r#""cookie":"s id""#),
                "$.identity.session.cookie",
                "token",
            ),
            (
                session(r#""cookie":"sid\u0001""#),
                "$.identity.session.cookie",
                "token",
            ),
            (
                session(r#""cookie":"""#),
                "$.identity.session.cookie",
                "token",
            ),
            (
                session(r#""cookie":"caf\u00e9""#),
                "$.identity.session.cookie",
                "token",
            ),
        ];
        for (json, path, why) in &cases {
            let e = errors(json);
            assert_eq!(e.len(), 1, "{json}: {e:?}");
            assert!(e[0].starts_with(&format!("{path}: ")), "{json}: {e:?}");
            assert!(e[0].contains(why), "{json}: {e:?} should say {why:?}");
        }
        for ok in [
            route(r#"{"path_prefix":"/a/b.json","host":"Example.COM."}"#),
            route(r#"{"host":"example.com:8080"}"#),
            route(r#"{"host":"[::1]:80"}"#),
            route(r#"{"host":"[2001:db8::1]"}"#),
            route(r#"{"host":"xn--bcher-kva.example"}"#),
            session(r#""authority":"session.internal:8443","cookie":"__Host-sid""#),
            session(r#""cookie":"!#$%&'*+-.^_`|~09AZaz""#),
        ] {
            assert_eq!(errors(&ok), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn hostile_input_is_an_error_not_a_panic() {
        assert!(parse(&[0xff, 0xfe, 0x00]).is_err());
        let deep = "[".repeat(10_000);
        assert!(parse(deep.as_bytes()).is_err());
        assert!(parse(&vec![b' '; MAX_CONFIG_BYTES + 1]).is_err());
        assert!(parse(b"{} {}").is_err());
        // A top-level array: the path is `$[0]`, not `$.[0]`.
        let e = errors("[[[[1]]]]");
        assert!(e[0].starts_with("$[0]: "), "{e:?}");
    }

    fn with_bounds(keyed: usize, per_route: usize) -> String {
        let b = |j: usize, per: &str| {
            format!(r#"{{"name":"b{j}","per":"{per}","limit":5,"window":"PT1M"}}"#)
        };
        let bounds: Vec<String> = (0..keyed)
            .map(|j| b(j, "address"))
            .chain((keyed..keyed + per_route).map(|j| b(j, "route")))
            .collect();
        format!(
            r#"{{"routes":[{{"name":"r","bounds":[{}]}}]}}"#,
            bounds.join(",")
        )
    }

    #[test]
    fn a_configuration_over_the_key_budget_is_refused_with_the_numbers() {
        assert!(
            errors(&with_bounds(128, 896)).is_empty(),
            "the most that fits"
        );
        let e = errors(&with_bounds(129, 0));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("$.routes: 129 bounds keyed per caller need 161508 shared-data keys")
                && e[0].contains("(1252 each, to track up to 10,000 callers)")
                && e[0].contains("the budget is 161280 keys"),
            "{e:?}"
        );
        let e = errors(&with_bounds(0, 1_025));
        assert!(e[0].starts_with("$.routes: 1025 bounds"), "{e:?}");
        // Keys that fill the budget exactly (128 tables and 1,024 bounds
        // per route) fit it: only the bound count is over.
        let e = errors(&with_bounds(128, 1_024));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("$.routes: 1152 bounds"), "{e:?}");
    }

    /// A limit is 1 to u32::MAX, both ends included.
    #[test]
    fn a_limit_fits_in_32_bits() {
        let with_limit = |n: u64| {
            errors(&format!(
                r#"{{"routes":[{{"name":"a","bounds":[{{"per":"address","limit":{n},"window":"PT1M"}}]}}]}}"#
            ))
        };
        assert!(with_limit(1).is_empty());
        assert!(with_limit(u64::from(u32::MAX)).is_empty());
        for n in [0, u64::from(u32::MAX) + 1] {
            let e = with_limit(n);
            assert!(e[0].starts_with("$.routes[0].bounds[0].limit"), "{e:?}");
        }
    }

    /// An operation's method is an HTTP method in capitals: an empty one is
    /// an error too.
    #[test]
    fn an_operation_s_method_is_written_in_capitals() {
        let with_method = |m: &str| {
            errors(&format!(
                r#"{{"routes":[{{"name":"a","operations":[{{"operation_id":"op","method":"{m}",
                "path":"/x","bounds":[{{"per":"address","limit":1,"window":"PT1M"}}]}}]}}]}}"#
            ))
        };
        assert!(with_method("POST").is_empty());
        for m in ["", "post", "PO ST"] {
            one_error_at(&with_method(m), "$.routes[0].operations[0].method", m);
        }
    }

    /// The size cap is inclusive (a configuration of exactly
    /// `MAX_CONFIG_BYTES` is read), and a document that is no object is
    /// an error at `$`, the root, not at a path of its own.
    #[test]
    fn the_size_cap_and_the_root_s_path() {
        let pad = |n: usize| format!("{GOOD}{}", " ".repeat(n - GOOD.len()));
        assert!(parse(pad(MAX_CONFIG_BYTES).as_bytes()).is_ok());
        let e = errors(&pad(MAX_CONFIG_BYTES + 1));
        assert!(
            e[0].starts_with("$: configuration is 1048577 bytes"),
            "{e:?}"
        );
        for doc in ["5", "[]", "\"routes\""] {
            let e = errors(doc);
            assert!(e[0].starts_with("$: invalid "), "{doc}: {e:?}");
        }
    }

    /// A JWT claim is a name, dotted for nested claims: no empty part
    /// anywhere (`a..b`, `.a`, `a.`), which no token could carry.
    #[test]
    fn a_claim_path_has_no_empty_part() {
        let with_claim = |c: &str| {
            errors(&format!(
                r#"{{"identity":{{"jwt":{{"user_claim":"{c}"}}}},"routes":[{{"name":"a",
                "bounds":[{{"per":"user","limit":1,"window":"PT1M"}}]}}]}}"#
            ))
        };
        assert!(with_claim("sub").is_empty());
        assert!(with_claim("realm_access.roles").is_empty());
        for c in ["", "a..b", ".a", "a."] {
            one_error_at(&with_claim(c), "$.identity.jwt.user_claim", c);
        }
    }

    /// Identity caches keep an answer at most an hour: 3,600 s is
    /// accepted, one more is refused, for JWTs and sessions alike.
    #[test]
    fn identity_caches_keep_an_answer_an_hour_at_most() {
        let jwt = |t: u64| {
            errors(&format!(
                r#"{{"identity":{{"jwt":{{"cache_ttl_s":{t}}}}},"routes":[]}}"#
            ))
        };
        let session = |t: u64| {
            errors(&format!(
                r#"{{"identity":{{"session":{{"cluster":"s","cache_ttl_s":{t}}}}},"routes":[]}}"#
            ))
        };
        for t in [0, 3_600] {
            assert!(jwt(t).is_empty(), "{:?}", jwt(t));
            assert!(session(t).is_empty(), "{:?}", session(t));
        }
        one_error_at(&jwt(3_601), "$.identity.jwt.cache_ttl_s", "jwt");
        one_error_at(&session(3_601), "$.identity.session.cache_ttl_s", "session");
    }

    /// Which identity sources give an organisation, a token id and roles
    /// (a bound per org or per token, a grant to roles or orgs needs one
    /// that does), source by source: each gives what it says and nothing
    /// more.
    #[test]
    fn each_identity_source_gives_what_it_says() {
        // (identity, gives org, token, roles)
        let sources = [
            (r#"{"session":{"cluster":"s"}}"#, [true, true, true]),
            (r#"{"jwt":{"org_claim":"org"}}"#, [true, false, false]),
            (r#"{"jwt":{"token_claim":"jti"}}"#, [false, true, false]),
            (r#"{"jwt":{"roles_claim":"roles"}}"#, [false, false, true]),
            (
                r#"{"header":{"user":"x-u","org":"x-o"}}"#,
                [true, false, false],
            ),
            (
                r#"{"header":{"user":"x-u","token":"x-t"}}"#,
                [false, true, false],
            ),
            (
                r#"{"header":{"user":"x-u","roles":"x-r"}}"#,
                [false, false, true],
            ),
            (
                r#"{"mtls":{"org_from_namespace":true}}"#,
                [true, false, false],
            ),
            (r#"{"jwt":{}}"#, [false, false, false]),
        ];
        // (bound, the error's path, needs org, token, roles)
        let bounds = [
            (r#""per":"org""#, "per", [true, false, false]),
            (r#""per":"token""#, "per", [false, true, false]),
            (
                r#""per":"user","applies_to":{"roles":["admin"]}"#,
                "applies_to.roles",
                [false, false, true],
            ),
            (
                r#""per":"user","applies_to":{"orgs":["acme"]}"#,
                "applies_to.orgs",
                [true, false, false],
            ),
        ];
        for (id, gives) in sources {
            for (bound, path, needs) in bounds {
                let e = errors(&format!(
                    r#"{{"identity":{id},"routes":[{{"name":"a","bounds":[
                    {{{bound},"limit":1,"window":"PT1M"}}]}}]}}"#
                ));
                let refused = needs.iter().zip(gives).any(|(n, g)| *n && !g);
                let at = format!("$.routes[0].bounds[0].{path}");
                if refused {
                    one_error_at(&e, &at, &format!("{id} {bound}"));
                } else {
                    assert!(e.is_empty(), "{id} {bound}: {e:?}");
                }
            }
        }
    }
}
