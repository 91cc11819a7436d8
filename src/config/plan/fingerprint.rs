//! Fingerprints: the identity of a route's bounds as compiled, so a changed
//! route starts its counts again and an unchanged one keeps them.

use super::cost::Cost;
use crate::config::{bound_name, BoundConfig, RouteConfig, Scope};
use siphasher::sip::SipHasher13;
use std::hash::{Hash, Hasher};

/// Fixed keys: fingerprints must agree across workers, VMs and restarts.
pub(super) fn stable_hash(value: &impl Hash) -> u64 {
    let mut h = SipHasher13::new_with_keys(0x7261_7465_626f_756e, 0x642d_6670_2d76_3031);
    value.hash(&mut h);
    h.finish()
}

/// What identifies a bound in a fingerprint.
fn bound_key(b: &BoundConfig, j: usize, all_shadow: bool) -> impl Hash + '_ {
    (
        bound_name(b, j),
        b.per,
        &b.applies_to,
        b.limit,
        b.window.clone(),
        b.shadow || all_shadow,
    )
}

/// See [`bound_fingerprint`].
const FLEET_SALT: u64 = 0x666c_6565_7400_0001;

pub(super) fn route_fingerprint(r: &RouteConfig, all_shadow: bool) -> u64 {
    let m = &r.matching;
    let bounds: Vec<_> = r
        .bounds
        .iter()
        .enumerate()
        .map(|(j, b)| bound_key(b, j, all_shadow))
        .collect();
    let operations: Vec<_> = r
        .operations
        .iter()
        .map(|o| {
            let bounds: Vec<_> = o
                .bounds
                .iter()
                .enumerate()
                .map(|(j, b)| bound_key(b, j, all_shadow))
                .collect();
            (&o.name, &o.operation_id, &o.method, &o.path, bounds)
        })
        .collect();
    stable_hash(&(
        &r.name,
        (&m.route_name, &m.host, &m.path_prefix, &m.methods),
        bounds,
        operations,
    ))
}

/// A bound's fingerprint: its route's, and its slot among the route's
/// shared-data bounds.
pub(super) fn bound_fingerprint(
    route_fp: u64,
    slot: usize,
    scope: Scope,
    cost: Option<&Cost>,
) -> u64 {
    // A fleet bound's entries are not a node bound's: the same bound
    // turned fleet (or back) must not read the other's counters. Salted
    // rather than hashed with the scope, so that no node bound's
    // fingerprint (and count) changes with this release.
    stable_hash(&(route_fp, slot))
        ^ if scope == Scope::Fleet { FLEET_SALT } else { 0 }
        // A count of units is not a count of requests: a bound given a
        // cost (or another one) starts again. Salted, as the fleet's.
        ^ cost.map_or(0, stable_hash)
}

/// See [`tier_salt`].
const TIER_SALT: u64 = 0x7469_6572_7300_0001;

/// What a bound sharing a lane with its tiers ([`super::Tier`]) mixes into
/// its fingerprint: its entries are not a lone bound's, so a bound that
/// starts sharing (on an upgrade, or when its tiers change) reads no old
/// entry and restarts its count once. The members' positions are in it:
/// another set of tiers is another layout.
pub(super) fn tier_salt(members: &[usize]) -> u64 {
    stable_hash(&(TIER_SALT, members))
}
