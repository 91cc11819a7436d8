//! `ratebound diff OLD NEW`: which counters a push of NEW over OLD resets,
//! keeps, adds and drops, decided the way the filter decides it.
//!
//! Node and fleet bounds count in shared data, in lanes the lane directory
//! (`count::directory`) hands out by (instance, fingerprint): a bound of the
//! new configuration whose fingerprint was in the old one, under the same
//! instance, keeps its lane and so its counts; any other starts from zero.
//! A fingerprint ([`Bound::fingerprint`]) covers the route's name and match
//! and every bound of the route (operations included), so one changed bound
//! resets its whole route. That is read here from the compiled plans, never
//! re-derived: `keeps` is "the same fingerprint is in OLD".
//!
//! Installation bounds count in the rate-limit service, under the domain,
//! the bound's descriptor (`<route>.<bound>`), the key it counts per, and
//! the service's clock window: the same four keep the count (a new limit
//! then applies to it), anything else starts a new one. Their keys are
//! hashed with the key secret: a new secret's source (another `env` or
//! `value`) resets them all, unless the new plan reads the old secret
//! beside (`key_secret.also_read`, a rotation) — [`resecret`].
//!
//! Within a lane or at the service, a caller is found by its key
//! (`pipeline::caller_key`): the value it is counted under (a user, org,
//! token, model or account) or, without one, its network, hashed with the
//! prefix length. So a bound that keeps its lane still counts every caller
//! afresh when what makes the key changes: the client-address prefixes
//! (every caller counted by address) or the identity sources that give the
//! value (every user, org or token the new source names otherwise).
//! [`rekeyed`] reads both from the compiled plans.
//!
//! A new module (a WasmPlugin's `url` or `sha256`) is said apart from the
//! bounds: [`module_change`].

use crate::stream::PluginVm;
use ratebound::config::plan::{Bound, Plan, Prefixes, Route, Tier};
use ratebound::config::{IdentityConfig, Per, Scope, SessionSource};
use serde::Serialize;

/// What a push does to one bound's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PushVerdict {
    /// The counts go on.
    Keeps,
    /// The bound is there before and after, and counts from zero after.
    Resets,
    /// New: counts from zero.
    Adds,
    /// Gone: its counts are no longer read.
    Drops,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub route: String,
    /// As stats and refusals name it (`<operation>.<bound>` for an operation's).
    pub bound: String,
    #[serde(serialize_with = "scope_json")]
    pub scope: Scope,
    pub verdict: PushVerdict,
    /// Why it resets (empty otherwise), in plain words.
    pub why: Vec<String>,
    /// The rate before and after, e.g. "5 per PT1M" (None where absent).
    pub old: Option<String>,
    pub new: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub old_instance: String,
    pub new_instance: String,
    pub changes: Vec<Change>,
    pub notes: Vec<String>,
    /// Both inputs are WasmPlugins whose module differs.
    pub module: Option<ModuleChange>,
}

/// A WasmPlugin's module, before and after, and what that does to counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleChange {
    pub old_url: Option<String>,
    pub new_url: Option<String>,
    pub old_sha256: Option<String>,
    pub new_sha256: Option<String>,
    /// In plain words.
    pub words: String,
}

impl ModuleChange {
    /// The same change, naming the bounds of `new` that keep their windows
    /// in one entry with the other bounds on their key: those are the
    /// counts an upgrade from a module before tiers restarts once.
    pub fn naming_tiers(mut self, new: &Plan) -> ModuleChange {
        let tiered: Vec<String> = new
            .routes
            .iter()
            .flat_map(|r| {
                shared(r)
                    .filter(|b| b.tier != Tier::Own)
                    .map(move |b| format!("{}.{}", r.name, b.name))
            })
            .collect();
        if !tiered.is_empty() {
            self.words.push_str(&format!(
                " (here: {}; an upgrade from an earlier module restarts them once)",
                tiered.join(", ")
            ));
        }
        self
    }
}

impl Diff {
    pub fn count(&self, v: PushVerdict) -> usize {
        self.changes.iter().filter(|c| c.verdict == v).count()
    }

    /// Some counts are lost: a bound resets or is dropped.
    pub fn loses_counts(&self) -> bool {
        self.count(PushVerdict::Resets) + self.count(PushVerdict::Drops) > 0
    }
}

fn per_word(p: Per) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{p:?}"))
}

/// A scope in JSON as a configuration writes it (`node`, ...).
fn scope_json<S: serde::Serializer>(scope: &Scope, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(scope_word(*scope))
}

fn scope_of(b: &Bound) -> Scope {
    b.scope.kind()
}

/// The route's bounds counted in shared data (node and fleet).
fn shared(r: &Route) -> impl Iterator<Item = &Bound> {
    r.bounds.iter().filter(|b| b.in_shared_data())
}

fn rate(b: &Bound) -> String {
    format!("{} per {}", b.rate.limit, b.written.window)
}

/// Why bound `b` of route `r` (new) no longer has the fingerprint of its
/// namesake `ob` of route `or` (old).
fn why_reset(or: &Route, ob: &Bound, r: &Route, b: &Bound, instance: bool) -> Vec<String> {
    let mut why = Vec::new();
    if instance {
        why.push("the instance changed: every bound counts under the new one".to_string());
        return why;
    }
    if or.matching != r.matching {
        why.push("the route's match changed".to_string());
    }
    if ob.per != b.per {
        why.push(format!("per {} → {}", per_word(ob.per), per_word(b.per)));
    }
    if ob.rate.limit != b.rate.limit {
        why.push(format!("limit {} → {}", ob.rate.limit, b.rate.limit));
    }
    if ob.written.window != b.written.window {
        why.push(format!(
            "window {} → {}",
            ob.written.window, b.written.window
        ));
    }
    if ob.applies_to != b.applies_to {
        why.push("applies_to changed".to_string());
    }
    if ob.cost != b.cost {
        why.push("what a request costs changed: a count of units starts again".to_string());
    }
    if ob.shadow != b.shadow {
        why.push(if b.shadow {
            "now shadow (counts, never refuses)".to_string()
        } else {
            "no longer shadow".to_string()
        });
    }
    if scope_of(ob) != scope_of(b) {
        why.push(format!(
            "scope {} → {}",
            scope_word(scope_of(ob)),
            scope_word(scope_of(b))
        ));
    }
    if ob.written.index != b.written.index || ob.written.operation != b.written.operation {
        why.push(format!("moved: {} → {}", ob.written.path, b.written.path));
    }
    let names = |r: &Route, b: &Bound| -> Vec<String> {
        r.lane_of(b).iter().map(|t| t.name.clone()).collect()
    };
    let (was, now) = (names(or, ob), names(r, b));
    if was != now {
        // Bounds on one key keep their windows in one entry: another set
        // of them is another entry (`config::plan::Tier`).
        why.push(match (was.is_empty(), now.is_empty()) {
            (true, false) => format!(
                "now keeps its windows in one entry with the bounds on its key ({}): \
                 its count restarts once",
                now.join(", ")
            ),
            (false, true) => format!(
                "no longer shares an entry with the bounds on its key ({}): its count \
                 restarts once",
                was.join(", ")
            ),
            _ => format!(
                "the bounds sharing its entry changed ({} → {}): its count restarts once",
                was.join(", "),
                now.join(", ")
            ),
        });
    }
    if why.is_empty() {
        // Its own key is the same: the route's fingerprint changed with
        // another of its bounds or operations.
        let others: Vec<&str> = shared(r)
            .filter(|x| x.name != b.name)
            .filter(|x| {
                shared(or)
                    .find(|y| y.name == x.name)
                    .is_none_or(|y| !same_key(y, x))
            })
            .map(|x| x.name.as_str())
            .collect();
        let gone: Vec<&str> = shared(or)
            .filter(|y| !shared(r).any(|x| x.name == y.name))
            .map(|y| y.name.as_str())
            .collect();
        if !others.is_empty() || !gone.is_empty() {
            let mut names: Vec<&str> = others;
            names.extend(gone);
            why.push(format!(
                "another bound of route {} changed ({}): a route's bounds reset together",
                r.name,
                names.join(", ")
            ));
        } else {
            why.push(format!(
                "route {} changed (an operation's method, path or id, or a node bound \
                 moved to or from the rate-limit service): a route's bounds reset together",
                r.name
            ));
        }
    }
    why
}

fn scope_word(s: Scope) -> &'static str {
    match s {
        Scope::Node => "node",
        Scope::Fleet => "fleet",
        Scope::Installation => "installation",
    }
}

/// What a bound's own part of the fingerprint holds.
fn same_key(a: &Bound, b: &Bound) -> bool {
    a.per == b.per
        && a.rate == b.rate
        && a.written.window == b.written.window
        && a.applies_to == b.applies_to
        && a.shadow == b.shadow
        && a.written.index == b.written.index
        && a.written.operation == b.written.operation
        && scope_of(a) == scope_of(b)
        && a.cost == b.cost
}

/// The identity sources that give a bound keyed `per` its value, in the
/// order they are consulted (`pipeline::phase::identity`), each with every
/// setting that changes the value it reads; empty where no identity gives
/// it.
fn value_sources(id: Option<&IdentityConfig>, per: Per) -> Vec<String> {
    let Some(id) = id else {
        return Vec::new();
    };
    let mut v = Vec::new();
    if let Some(j) = &id.jwt {
        let claim = match per {
            Per::User => Some(&j.user_claim),
            Per::Org => j.org_claim.as_ref(),
            Per::Token => j.token_claim.as_ref(),
            _ => None,
        };
        if let Some(c) = claim {
            v.push(format!(
                "JWT claim {c} (jwt_authn metadata {})",
                j.metadata_key
            ));
        }
    }
    if let Some(m) = &id.mtls {
        match per {
            Per::User => v.push("the mTLS peer's URI SAN".to_string()),
            Per::Org if m.org_from_namespace => {
                v.push("the mTLS peer's namespace".to_string());
            }
            _ => {}
        }
    }
    if let Some(h) = &id.header {
        let name = match per {
            Per::User => h.user.as_ref(),
            Per::Org => h.org.as_ref(),
            Per::Token => h.token.as_ref(),
            _ => None,
        };
        if let Some(n) = name {
            v.push(format!("header {n}"));
        }
    }
    if let Some(s) = &id.session {
        if per.needs_identity() {
            v.push(session_words(s));
        }
    }
    v
}

/// The session service as far as the identity it answers goes (its
/// timeouts and caches change no value).
fn session_words(s: &SessionSource) -> String {
    let mut w = format!(
        "the session service (cluster {}, path {}",
        s.cluster, s.path
    );
    if let Some(a) = &s.authority {
        w.push_str(&format!(", authority {a}"));
    }
    if let Some(c) = &s.cookie {
        w.push_str(&format!(", cookie {c}"));
    }
    if s.authorization {
        w.push_str(", authorization header");
    }
    w.push(')');
    w
}

fn sources_text(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", then ")
    }
}

/// What the value of a bound keyed `per` is called in plain words.
fn value_word(per: Per) -> &'static str {
    match per {
        Per::User => "user",
        Per::Org => "org",
        Per::Token => "token",
        Per::Model => "model",
        Per::Account => "account",
        Per::Route | Per::Address => "value",
    }
}

fn with_article(per: Per) -> String {
    let w = value_word(per);
    match per {
        Per::Org | Per::Account => format!("an {w}"),
        _ => format!("a {w}"),
    }
}

/// Why every caller of a bound keyed `per` that keeps its lane (or its
/// descriptor at the service) is still counted under a new key after the
/// push: the caller keys of `pipeline::caller_key`, read from both plans.
/// Empty when each caller keeps its key.
pub fn rekeyed(old: &Plan, new: &Plan, per: Per) -> Vec<String> {
    let mut why = Vec::new();
    if per == Per::Route {
        // One counter for the route: no caller key.
        return why;
    }
    // Who is counted by network: everybody (per address), or the callers
    // without a value.
    let who = |family: &str| {
        if per == Per::Address {
            format!("every {family} caller's count restarts")
        } else {
            format!(
                "callers counted by their {family} network (those without {}) restart",
                with_article(per)
            )
        }
    };
    let (o, n): (Prefixes, Prefixes) = (old.client_address, new.client_address);
    if o.ipv4 != n.ipv4 {
        why.push(format!(
            "client_address.ipv4_prefix {} → {}: {} (the prefix length is in the key)",
            o.ipv4,
            n.ipv4,
            who("IPv4")
        ));
    }
    if o.ipv6 != n.ipv6 {
        why.push(format!(
            "client_address.ipv6_prefix {} → {}: {} (the prefix length is in the key)",
            o.ipv6,
            n.ipv6,
            who("IPv6")
        ));
    }
    if per.needs_identity() {
        let (os, ns) = (
            value_sources(old.identity.as_ref(), per),
            value_sources(new.identity.as_ref(), per),
        );
        if os != ns {
            why.push(format!(
                "the {w} now comes from {} (was {}): each {w} counts from zero unless \
                 the new source names it with the same text, and a caller who gains or \
                 loses {a} moves between that {w}'s count and its network's",
                sources_text(&ns),
                sources_text(&os),
                w = value_word(per),
                a = with_article(per)
            ));
        }
    }
    why
}

/// What a new module does to counts, when the two WasmPlugins load
/// different ones (a `url` or `sha256` that differs). Counters live in
/// shared data, which Envoy keeps per `vm_id` while any VM of it is alive;
/// the VM of the old module serves until the new one has taken over
/// (docs/envoy-host.md, "Configurations and root contexts"), so the counts
/// are there for the new module, and carry over when it keys them as the
/// old one did.
pub fn module_change(old: &PluginVm, new: &PluginVm) -> Option<ModuleChange> {
    if old.url == new.url && old.sha256 == new.sha256 {
        return None;
    }
    let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_string());
    let what = if old.sha256 != new.sha256 {
        format!("sha256 {} → {}", shown(&old.sha256), shown(&new.sha256))
    } else {
        format!("url {} → {}", shown(&old.url), shown(&new.url))
    };
    Some(ModuleChange {
        old_url: old.url.clone(),
        new_url: new.url.clone(),
        old_sha256: old.sha256.clone(),
        new_sha256: new.sha256.clone(),
        words: format!(
            "the module changes ({what}): Envoy loads it in a new VM. Counters are in \
             shared data, which outlives the old VM (the same vm_id), so each bound above \
             keeps or restarts as said only if the new module keys counters as the old \
             one: a release that changes how counters are keyed says \"resets counts\" \
             in its CHANGELOG, and then every count restarts. Installation bounds count \
             in the rate-limit service and are not touched by the VM, unless the release \
             keys them anew: the first release after 0.1.0 does, once, for installation bounds without \"shape\" \
             (they now slide; the window in flight starts afresh; \"shape\": \"fixed\" \
             keeps the old keys); and the release after 0.1.0 that keeps a route's node \
             bounds on one key (tiers) in one entry restarts those bounds' counts once"
        ),
    })
}

fn find_route<'a>(p: &'a Plan, name: &str) -> Option<&'a Route> {
    p.routes.iter().find(|r| r.name == name)
}

/// The changes a push of `new` over `old` makes to the counters.
pub fn diff(old: &Plan, new: &Plan) -> Diff {
    let instance_changed = old.instance != new.instance;
    let mut changes = Vec::new();
    let mut notes = Vec::new();

    // Node and fleet bounds: the lane directory's rule.
    let old_fps: Vec<u64> = if instance_changed {
        Vec::new()
    } else {
        old.routes
            .iter()
            .flat_map(|r| shared(r).map(|b| b.fingerprint))
            .collect()
    };
    for r in &new.routes {
        for b in shared(r) {
            let namesake = find_route(old, &r.name)
                .and_then(|or| shared(or).find(|x| x.name == b.name).map(|x| (or, x)));
            let (verdict, mut why) = if old_fps.contains(&b.fingerprint) {
                (PushVerdict::Keeps, Vec::new())
            } else if let Some((or, ob)) = namesake {
                (
                    PushVerdict::Resets,
                    why_reset(or, ob, r, b, instance_changed),
                )
            } else {
                (PushVerdict::Adds, Vec::new())
            };
            // The lane kept, its callers may still be counted under new keys.
            let rekey = if instance_changed || verdict == PushVerdict::Adds {
                Vec::new()
            } else {
                rekeyed(old, new, b.per)
            };
            let verdict = if rekey.is_empty() {
                verdict
            } else {
                PushVerdict::Resets
            };
            why.extend(rekey);
            changes.push(Change {
                route: r.name.clone(),
                bound: b.name.clone(),
                scope: scope_of(b),
                verdict,
                why,
                old: namesake.map(|(_, ob)| rate(ob)),
                new: Some(rate(b)),
            });
        }
    }
    for or in &old.routes {
        for ob in shared(or) {
            let still =
                find_route(new, &or.name).is_some_and(|r| shared(r).any(|x| x.name == ob.name));
            if !still {
                changes.push(Change {
                    route: or.name.clone(),
                    bound: ob.name.clone(),
                    scope: scope_of(ob),
                    verdict: PushVerdict::Drops,
                    why: Vec::new(),
                    old: Some(rate(ob)),
                    new: None,
                });
            }
        }
    }

    // Installation bounds: the service's key.
    let domain = |p: &Plan| p.service.as_ref().map(|s| s.domain.clone());
    let (old_domain, new_domain) = (domain(old), domain(new));
    for r in &new.routes {
        for b in r.installation_bounds_all() {
            let namesake = find_route(old, &r.name)
                .and_then(|or| or.installation_bounds_all().find(|x| x.name == b.name));
            let (verdict, why) = match namesake {
                None => (PushVerdict::Adds, Vec::new()),
                Some(ob) => {
                    let mut why = Vec::new();
                    if old_domain != new_domain {
                        why.push(format!(
                            "domain {} → {}",
                            old_domain.as_deref().unwrap_or("-"),
                            new_domain.as_deref().unwrap_or("-")
                        ));
                    }
                    let (o, n) = (ob.installation(), b.installation());
                    let (od, nd) = (o.map(|x| x.0), n.map(|x| x.0));
                    let (ou, nu) = (o.map(|x| x.1), n.map(|x| x.1));
                    let (os, ns) = (o.map(|x| x.2), n.map(|x| x.2));
                    if od != nd {
                        why.push(format!(
                            "descriptor {} → {}",
                            od.unwrap_or("-"),
                            nd.unwrap_or("-")
                        ));
                    }
                    if ob.per != b.per {
                        why.push(format!("per {} → {}", per_word(ob.per), per_word(b.per)));
                    }
                    if ou != nu {
                        why.push(format!(
                            "window {} → {}: the service counts in another clock window",
                            ob.written.window, b.written.window
                        ));
                    }
                    if let Some((os, ns)) = os.zip(ns).filter(|(o, n)| o != n) {
                        why.push(format!(
                            "shape {} → {}: a sliding bound's counts are kept per window \
                             under keys of their own, so for one window each caller may \
                             get up to the limit again",
                            os.as_str(),
                            ns.as_str()
                        ));
                    }
                    // The descriptor's value is the caller's key, hashed
                    // with the secret.
                    why.extend(rekeyed(old, new, b.per));
                    if b.per != Per::Route {
                        why.extend(resecret(old, new));
                    }
                    if why.is_empty() {
                        (PushVerdict::Keeps, why)
                    } else {
                        (PushVerdict::Resets, why)
                    }
                }
            };
            changes.push(Change {
                route: r.name.clone(),
                bound: b.name.clone(),
                scope: Scope::Installation,
                verdict,
                why,
                old: namesake.map(rate),
                new: Some(rate(b)),
            });
        }
    }
    for or in &old.routes {
        for ob in or.installation_bounds_all() {
            let still = find_route(new, &or.name)
                .is_some_and(|r| r.installation_bounds_all().any(|x| x.name == ob.name));
            if !still {
                changes.push(Change {
                    route: or.name.clone(),
                    bound: ob.name.clone(),
                    scope: Scope::Installation,
                    verdict: PushVerdict::Drops,
                    why: Vec::new(),
                    old: Some(rate(ob)),
                    new: None,
                });
            }
        }
    }
    notes.extend(secret_notes(old, new));
    if instance_changed {
        notes.push(format!(
            "the instance changed ({} → {}): stats move to the new name, and node and fleet \
             counters start afresh (their lanes belong to the instance); installation \
             bounds keep their counts (the service keys them by domain and descriptor, \
             not by instance)",
            old.instance, new.instance
        ));
    }
    Diff {
        old_instance: old.instance.clone(),
        new_instance: new.instance.clone(),
        changes,
        notes,
        module: None,
    }
}

/// Where a plan's key secret comes from: `env NAME`, a value (its bytes,
/// never shown), or none; and the other secret of a rotation it reads.
#[derive(PartialEq)]
enum SecretSource<'a> {
    Env(&'a str),
    Value(&'a [u8]),
}

impl SecretSource<'_> {
    fn of(k: Option<&ratebound::config::KeySecretConfig>) -> Option<SecretSource<'_>> {
        let k = k?;
        match (&k.env, &k.value) {
            (Some(e), _) => Some(SecretSource::Env(e)),
            (None, Some(v)) => Some(SecretSource::Value(v.as_bytes())),
            _ => None,
        }
    }

    fn said(s: &Option<SecretSource<'_>>) -> String {
        match s {
            Some(SecretSource::Env(e)) => format!("env {e}"),
            Some(SecretSource::Value(_)) => "a value".into(),
            None => "none".into(),
        }
    }
}

fn counted_secret(p: &Plan) -> Option<SecretSource<'_>> {
    SecretSource::of(p.service.as_ref()?.key_secret.as_ref())
}

fn read_secret(p: &Plan) -> Option<SecretSource<'_>> {
    SecretSource::of(
        p.service
            .as_ref()?
            .key_secret
            .as_ref()?
            .also_read
            .as_deref(),
    )
}

/// Why an installation caller's key at the service changes with the
/// secret: a new secret counted, unless NEW reads OLD's beside it (a
/// rotation's `also_read`: the counts carry over).
fn resecret(old: &Plan, new: &Plan) -> Option<String> {
    let (o, n) = (counted_secret(old), counted_secret(new));
    if o == n || (o.is_some() && read_secret(new) == o) {
        return None;
    }
    Some(format!(
        "key secret {} → {}: every caller's key at the service is new (unless both hold the \
         same bytes); rotate with key_secret.also_read to keep the counts",
        SecretSource::said(&o),
        SecretSource::said(&n)
    ))
}

/// What a change of the secrets does beyond the bounds' verdicts.
fn secret_notes(old: &Plan, new: &Plan) -> Vec<String> {
    let (o, n) = (counted_secret(old), counted_secret(new));
    let (or, nr) = (read_secret(old), read_secret(new));
    let mut notes = Vec::new();
    if o != n {
        notes.push(format!(
            "fleet bounds' fleet-wide counts are kept under the key secret, which changed ({} → \
             {}): they start afresh at the service (each node's own count stays)",
            SecretSource::said(&o),
            SecretSource::said(&n)
        ));
    }
    if o != n && o.is_some() && nr == o {
        notes.push(format!(
            "key secret rotation: counted under {}, reading the counts under {} beside: \
             installation counts carry over, while Envoys with either configuration run side \
             by side too",
            SecretSource::said(&n),
            SecretSource::said(&o)
        ));
    } else if or != nr && nr.is_some() {
        notes.push(format!(
            "key_secret.also_read {}: its counts are read beside (a rotation's first push, \
             before the secret switches to it)",
            SecretSource::said(&nr)
        ));
    } else if or != nr && o == n {
        notes.push(format!(
            "key_secret.also_read {} is no longer read: push this only once the longest \
             installation window has passed since the last Envoy counting under it stopped, \
             or those counts are lost",
            SecretSource::said(&or)
        ));
    }
    notes
}

/// The diff as text: one line per bound, grouped by verdict, then a summary.
pub fn text(d: &Diff) -> String {
    let mut s = String::new();
    for (v, word) in [
        (PushVerdict::Resets, "resets"),
        (PushVerdict::Drops, "drops"),
        (PushVerdict::Adds, "adds"),
        (PushVerdict::Keeps, "keeps"),
    ] {
        for c in d.changes.iter().filter(|c| c.verdict == v) {
            let rate = match (&c.old, &c.new) {
                (Some(o), Some(n)) if o != n => format!("{o} → {n}"),
                (_, Some(n)) => n.clone(),
                (Some(o), None) => o.clone(),
                (None, None) => String::new(),
            };
            s.push_str(&format!(
                "{word:<6} {}/{} ({}, {rate})\n",
                c.route,
                c.bound,
                scope_word(c.scope)
            ));
            for w in &c.why {
                s.push_str(&format!("         {w}\n"));
            }
        }
    }
    for n in &d.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    if let Some(m) = &d.module {
        s.push_str(&format!("module: {}\n", m.words));
    }
    s.push_str(&format!(
        "{} reset, {} dropped, {} added, {} kept\n",
        d.count(PushVerdict::Resets),
        d.count(PushVerdict::Drops),
        d.count(PushVerdict::Adds),
        d.count(PushVerdict::Keeps)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratebound::config::parse;

    fn plan(json: &str) -> Plan {
        Plan::compile(&parse(json.as_bytes()).unwrap())
    }

    const OLD: &str = r#"{"instance":"shop","routes":[
        {"name":"api","match":{"path_prefix":"/api"},"bounds":[
            {"name":"per_address","per":"address","limit":100,"window":"PT1M"},
            {"name":"burst","per":"address","limit":10,"window":"PT1S"}]},
        {"name":"hello","match":{"path_prefix":"/hello"},"bounds":[
            {"name":"per_address","per":"address","limit":5,"window":"PT1M"}]},
        {"name":"old","match":{"path_prefix":"/old"},"bounds":[
            {"name":"b","per":"route","limit":5,"window":"PT1M"}]}]}"#;

    fn verdicts(d: &Diff) -> Vec<(String, PushVerdict)> {
        d.changes
            .iter()
            .map(|c| (format!("{}/{}", c.route, c.bound), c.verdict))
            .collect()
    }

    #[test]
    fn the_same_configuration_keeps_everything() {
        let d = diff(&plan(OLD), &plan(OLD));
        assert!(d.changes.iter().all(|c| c.verdict == PushVerdict::Keeps));
        assert_eq!(d.changes.len(), 4);
        assert!(!d.loses_counts());
    }

    #[test]
    fn one_changed_bound_resets_its_route_and_says_why() {
        let new = OLD.replace(r#""limit":10,"#, r#""limit":20,"#);
        let d = diff(&plan(OLD), &plan(&new));
        assert_eq!(
            verdicts(&d),
            vec![
                ("api/per_address".into(), PushVerdict::Resets),
                ("api/burst".into(), PushVerdict::Resets),
                ("hello/per_address".into(), PushVerdict::Keeps),
                ("old/b".into(), PushVerdict::Keeps),
            ]
        );
        let burst = &d.changes[1];
        assert_eq!(burst.why, vec!["limit 10 → 20".to_string()]);
        assert_eq!(burst.old.as_deref(), Some("10 per PT1S"));
        assert_eq!(burst.new.as_deref(), Some("20 per PT1S"));
        assert!(d.changes[0].why[0].starts_with("another bound of route api changed (burst)"));
        assert!(d.loses_counts());
    }

    #[test]
    fn added_and_dropped_routes_and_bounds() {
        let new = r#"{"instance":"shop","routes":[
            {"name":"api","match":{"path_prefix":"/api"},"bounds":[
                {"name":"per_address","per":"address","limit":100,"window":"PT1M"},
                {"name":"burst","per":"address","limit":10,"window":"PT1S"}]},
            {"name":"hello","match":{"path_prefix":"/hello"},"bounds":[
                {"name":"per_address","per":"address","limit":5,"window":"PT1M"}]},
            {"name":"fresh","match":{"path_prefix":"/fresh"},"bounds":[
                {"name":"b","per":"route","limit":5,"window":"PT1M"}]}]}"#;
        let d = diff(&plan(OLD), &plan(new));
        assert_eq!(d.count(PushVerdict::Keeps), 3);
        assert_eq!(
            verdicts(&d)[3..],
            [
                ("fresh/b".into(), PushVerdict::Adds),
                ("old/b".into(), PushVerdict::Drops)
            ]
        );
        let t = text(&d);
        assert!(t.contains("drops  old/b (node, 5 per PT1M)\n"), "{t}");
        assert!(t.contains("adds   fresh/b (node, 5 per PT1M)\n"), "{t}");
        assert!(t.ends_with("0 reset, 1 dropped, 1 added, 3 kept\n"), "{t}");
    }

    #[test]
    fn a_new_match_resets_the_route() {
        let new = OLD.replace(r#""/hello""#, r#""/hi""#);
        let d = diff(&plan(OLD), &plan(&new));
        let hello = d.changes.iter().find(|c| c.route == "hello").unwrap();
        assert_eq!(hello.verdict, PushVerdict::Resets);
        assert_eq!(hello.why, vec!["the route's match changed".to_string()]);
    }

    #[test]
    fn a_new_instance_resets_every_node_bound() {
        let new = OLD.replace(r#""shop""#, r#""store""#);
        let d = diff(&plan(OLD), &plan(&new));
        assert_eq!(d.count(PushVerdict::Resets), 4);
        assert!(d.notes.iter().any(|n| n.contains("shop → store")));
    }

    #[test]
    fn reordering_routes_keeps_their_counts() {
        // The fingerprint holds the route's name and bounds, not its position.
        let new = r#"{"instance":"shop","routes":[
            {"name":"old","match":{"path_prefix":"/old"},"bounds":[
                {"name":"b","per":"route","limit":5,"window":"PT1M"}]},
            {"name":"hello","match":{"path_prefix":"/hello"},"bounds":[
                {"name":"per_address","per":"address","limit":5,"window":"PT1M"}]},
            {"name":"api","match":{"path_prefix":"/api"},"bounds":[
                {"name":"per_address","per":"address","limit":100,"window":"PT1M"},
                {"name":"burst","per":"address","limit":10,"window":"PT1S"}]}]}"#;
        let d = diff(&plan(OLD), &plan(new));
        assert!(!d.loses_counts(), "{}", text(&d));
    }

    const SIGNIN: &str = r#"{"instance":"signin",
        "rate_limit_service":{"cluster":"rls","domain":"signin","key_secret":{"env":"K"}},
        "routes":[{"name":"login","match":{"path_prefix":"/login"},"account":{"json":"username"},
          "bounds":[{"name":"attempts","per":"account","scope":"installation","limit":5,"window":"PT1M"}]}]}"#;

    #[test]
    fn installation_bounds_keep_their_count_under_a_new_limit_not_a_new_window() {
        let d = diff(
            &plan(SIGNIN),
            &plan(&SIGNIN.replace(r#""limit":5"#, r#""limit":9"#)),
        );
        assert_eq!(
            verdicts(&d),
            vec![("login/attempts".into(), PushVerdict::Keeps)]
        );
        assert_eq!(d.changes[0].scope, Scope::Installation);
        let d = diff(&plan(SIGNIN), &plan(&SIGNIN.replace("PT1M", "PT1H")));
        assert_eq!(d.changes[0].verdict, PushVerdict::Resets);
        assert!(d.changes[0].why[0].starts_with("window PT1M → PT1H"));
        let d = diff(
            &plan(SIGNIN),
            &plan(&SIGNIN.replace(r#""domain":"signin""#, r#""domain":"login""#)),
        );
        assert_eq!(d.changes[0].why, vec!["domain signin → login".to_string()]);
        // The shape: a sliding bound's counts are under keys of their own.
        let fixed = SIGNIN.replace(
            r#""scope":"installation""#,
            r#""scope":"installation","shape":"fixed""#,
        );
        let d = diff(&plan(&fixed), &plan(SIGNIN));
        assert_eq!(d.changes[0].verdict, PushVerdict::Resets);
        assert!(
            d.changes[0].why[0].starts_with("shape fixed → sliding: "),
            "{:?}",
            d.changes[0].why
        );
        let d = diff(
            &plan(SIGNIN),
            &plan(&SIGNIN.replace(r#""shape":"sliding""#, "")),
        );
        assert_eq!(d.changes[0].verdict, PushVerdict::Keeps);
    }
    #[test]
    fn a_new_secret_resets_installation_keys_and_a_rotation_keeps_them() {
        let keyed = |k: &str| plan(&SIGNIN.replace(r#"{"env":"K"}"#, k));
        let step0 = keyed(r#"{"env":"K"}"#);
        let step1 = keyed(r#"{"env":"K","also_read":{"env":"K2"}}"#);
        let step2 = keyed(r#"{"env":"K2","also_read":{"env":"K"}}"#);
        let step3 = keyed(r#"{"env":"K2"}"#);
        // Swapped in one push: every account counts afresh.
        let d = diff(&step0, &step3);
        assert_eq!(d.changes[0].verdict, PushVerdict::Resets);
        assert!(
            d.changes[0].why[0].starts_with("key secret env K → env K2"),
            "{:?}",
            d.changes[0].why
        );
        assert!(d.loses_counts());
        // The three pushes of a rotation keep them, each saying what it does.
        for (a, b, said) in [
            (
                &step0,
                &step1,
                "key_secret.also_read env K2: its counts are read beside",
            ),
            (
                &step1,
                &step2,
                "key secret rotation: counted under env K2, reading the counts under env K beside",
            ),
            (
                &step2,
                &step3,
                "key_secret.also_read env K is no longer read",
            ),
        ] {
            let d = diff(a, b);
            assert_eq!(
                verdicts(&d),
                vec![("login/attempts".into(), PushVerdict::Keeps)],
                "{}",
                text(&d)
            );
            assert!(d.notes.iter().any(|n| n.starts_with(said)), "{:?}", d.notes);
        }
        // A route's one counter has no caller key to hash.
        let route = |k: &str| {
            plan(
                &SIGNIN
                    .replace(r#"{"env":"K"}"#, k)
                    .replace(r#""per":"account""#, r#""per":"route""#),
            )
        };
        let d = diff(&route(r#"{"env":"K"}"#), &route(r#"{"env":"K2"}"#));
        assert_eq!(d.changes[0].verdict, PushVerdict::Keeps, "{}", text(&d));
    }

    const KEYED: &str = r#"{"instance":"shop","identity":{"header":{"user":"x-user","org":"x-org"}},"routes":[
        {"name":"api","match":{"path_prefix":"/api"},"bounds":[
            {"name":"per_address","per":"address","limit":100,"window":"PT1M"}]},
        {"name":"user","match":{"path_prefix":"/user"},"bounds":[
            {"name":"per_user","per":"user","limit":10,"window":"PT1M"}]},
        {"name":"org","match":{"path_prefix":"/org"},"bounds":[
            {"name":"per_org","per":"org","limit":10,"window":"PT1M"}]},
        {"name":"all","match":{"path_prefix":"/all"},"bounds":[
            {"name":"b","per":"route","limit":5,"window":"PT1M"}]}]}"#;

    fn verdict_of<'a>(d: &'a Diff, route: &str) -> &'a Change {
        d.changes.iter().find(|c| c.route == route).unwrap()
    }

    /// A new prefix re-keys every caller, yet the lanes (and so the
    /// fingerprints) stay: the diff must not say "0 reset".
    #[test]
    fn a_new_ipv4_prefix_restarts_every_address_caller_but_not_a_route_count() {
        let new = KEYED.replace(
            r#""instance":"shop","#,
            r#""instance":"shop","client_address":{"ipv4_prefix":24},"#,
        );
        let d = diff(&plan(KEYED), &plan(&new));
        let a = verdict_of(&d, "api");
        assert_eq!(a.verdict, PushVerdict::Resets);
        assert_eq!(
            a.why,
            vec![
                "client_address.ipv4_prefix 32 → 24: every IPv4 caller's count restarts \
                  (the prefix length is in the key)"
                    .to_string()
            ]
        );
        // A user bound counts its anonymous callers by network.
        let u = verdict_of(&d, "user");
        assert_eq!(u.verdict, PushVerdict::Resets);
        assert!(
            u.why[0].contains("callers counted by their IPv4 network (those without a user)"),
            "{:?}",
            u.why
        );
        assert_eq!(verdict_of(&d, "all").verdict, PushVerdict::Keeps);
        assert!(d.loses_counts());
        assert!(
            text(&d).ends_with("3 reset, 0 dropped, 0 added, 1 kept\n"),
            "{}",
            text(&d)
        );
    }

    #[test]
    fn a_new_ipv6_prefix_says_ipv6_callers_restart() {
        let new = KEYED.replace(
            r#""instance":"shop","#,
            r#""instance":"shop","client_address":{"ipv6_prefix":48},"#,
        );
        let d = diff(&plan(KEYED), &plan(&new));
        let a = verdict_of(&d, "api");
        assert_eq!(a.verdict, PushVerdict::Resets);
        assert!(a.why[0].starts_with("client_address.ipv6_prefix 64 → 48: every IPv6 caller"));
        // The same prefixes written out are no change.
        let same = KEYED.replace(
            r#""instance":"shop","#,
            r#""instance":"shop","client_address":{"ipv4_prefix":32,"ipv6_prefix":64},"#,
        );
        assert!(!diff(&plan(KEYED), &plan(&same)).loses_counts());
    }

    #[test]
    fn a_new_identity_source_restarts_the_bounds_keyed_on_what_it_gives() {
        let new = KEYED.replace(r#""user":"x-user""#, r#""user":"x-account""#);
        let d = diff(&plan(KEYED), &plan(&new));
        let u = verdict_of(&d, "user");
        assert_eq!(u.verdict, PushVerdict::Resets);
        assert!(
            u.why[0].starts_with("the user now comes from header x-account (was header x-user)"),
            "{:?}",
            u.why
        );
        // Address, org (the same org header) and route bounds keep.
        for r in ["api", "org", "all"] {
            assert_eq!(verdict_of(&d, r).verdict, PushVerdict::Keeps, "{r}");
        }
        // A JWT claim replacing the header: the user resets, and roles
        // (which decide whom a bound applies to, never its key) do not.
        let jwt = KEYED.replace(
            r#""header":{"user":"x-user","org":"x-org"}"#,
            r#""header":{"user":"x-user","org":"x-org"},"jwt":{"user_claim":"email"}"#,
        );
        let d = diff(&plan(KEYED), &plan(&jwt));
        assert!(verdict_of(&d, "user").why[0].starts_with(
            "the user now comes from JWT claim email (jwt_authn metadata payload), then header x-user (was header x-user)"
        ));
        let roles = jwt.replace(
            r#""user_claim":"email""#,
            r#""user_claim":"email","roles_claim":"r""#,
        );
        assert!(!diff(&plan(&jwt), &plan(&roles)).loses_counts());
        // Another org header: org bounds reset, user bounds keep.
        let org = KEYED.replace(r#""org":"x-org""#, r#""org":"x-tenant""#);
        let d = diff(&plan(KEYED), &plan(&org));
        assert_eq!(verdict_of(&d, "org").verdict, PushVerdict::Resets);
        assert_eq!(verdict_of(&d, "user").verdict, PushVerdict::Keeps);
    }

    #[test]
    fn the_session_service_rekeys_only_by_what_changes_its_answer() {
        let with = |timeout: u32, path: &str| {
            KEYED.replace(
                r#""header":{"user":"x-user","org":"x-org"}"#,
                &format!(
                    r#""header":{{"user":"x-user","org":"x-org"}},"session":{{"cluster":"auth","path":"{path}","timeout_ms":{timeout}}}"#
                ),
            )
        };
        let base = with(100, "/session");
        assert!(!diff(&plan(&base), &plan(&with(200, "/session"))).loses_counts());
        let d = diff(&plan(&base), &plan(&with(100, "/whoami")));
        assert_eq!(verdict_of(&d, "user").verdict, PushVerdict::Resets);
        assert!(verdict_of(&d, "user").why[0].contains("path /whoami"));
    }

    #[test]
    fn installation_bounds_are_rekeyed_by_a_prefix_and_keep_under_a_new_instance() {
        let d = diff(
            &plan(SIGNIN),
            &plan(&SIGNIN.replace(
                r#""instance":"signin","#,
                r#""instance":"signin","client_address":{"ipv4_prefix":16},"#,
            )),
        );
        assert_eq!(d.changes[0].verdict, PushVerdict::Resets);
        assert!(
            d.changes[0].why[0].contains("(those without an account)"),
            "{:?}",
            d.changes[0].why
        );
        let d = diff(
            &plan(SIGNIN),
            &plan(&SIGNIN.replace(r#""instance":"signin""#, r#""instance":"login""#)),
        );
        assert_eq!(d.changes[0].verdict, PushVerdict::Keeps);
        assert!(d
            .notes
            .iter()
            .any(|n| n.contains("installation bounds keep")));
    }

    /// Issue 41: bounds on one key keep their windows in one entry. A
    /// bound that starts (or stops) sharing it restarts its count once,
    /// and the diff says so for each; a module upgrade names the bounds
    /// that share (their counts restart once from an earlier module).
    #[test]
    fn a_bound_that_starts_sharing_its_entry_restarts_once_and_says_so() {
        let half = OLD.replace(
            r#""limit":10,"window":"PT1S"}"#,
            r#""limit":10,"window":"PT1S","enforce_percent":50}"#,
        );
        // In the rollout, `burst` is enforced in part: its own lane. In
        // full, it shares `per_address`'s entry: both restart once.
        let d = diff(&plan(&half), &plan(OLD));
        for bound in ["per_address", "burst"] {
            let c = d
                .changes
                .iter()
                .find(|c| c.route == "api" && c.bound == bound)
                .unwrap();
            assert_eq!(c.verdict, PushVerdict::Resets, "{bound}");
            assert!(
                c.why.iter().any(|w| w.contains(
                    "now keeps its windows in one entry with the bounds on its key \
                     (per_address, burst): its count restarts once"
                )),
                "{bound}: {:?}",
                c.why
            );
        }
        let back = diff(&plan(OLD), &plan(&half));
        let c = back.changes.iter().find(|c| c.bound == "burst").unwrap();
        assert!(c
            .why
            .iter()
            .any(|w| w.contains("no longer shares an entry with the bounds on its key")));
        // Lone bounds are untouched.
        assert_eq!(verdict_of(&d, "hello").verdict, PushVerdict::Keeps);
        let vm = |sha: &str| PluginVm {
            url: Some("oci://r/ratebound:1".into()),
            sha256: Some(sha.into()),
            env: Vec::new(),
        };
        let m = module_change(&vm("a"), &vm("b"))
            .unwrap()
            .naming_tiers(&plan(OLD));
        assert!(
            m.words.contains(
                "(here: api.per_address, api.burst; an upgrade from an earlier module \
                 restarts them once)"
            ),
            "{}",
            m.words
        );
    }

    #[test]
    fn a_new_module_is_said_with_what_it_does_to_counts() {
        let vm = |sha: &str| PluginVm {
            url: Some("oci://r/ratebound:1".into()),
            sha256: Some(sha.into()),
            env: Vec::new(),
        };
        assert_eq!(module_change(&vm("a"), &vm("a")), None);
        let m = module_change(&vm("a"), &vm("b")).unwrap();
        assert!(m
            .words
            .starts_with("the module changes (sha256 a → b): Envoy loads it in a new VM"));
        assert!(m.words.contains("resets counts"));
        let mut d = diff(&plan(OLD), &plan(OLD));
        d.module = Some(m);
        assert!(text(&d).contains("\nmodule: the module changes (sha256 a → b)"));
        // Said, not counted as lost: the counts are in shared data.
        assert!(!d.loses_counts());
    }
}
