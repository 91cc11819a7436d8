//! One rule for what names a caller, whoever counts it: a node bound's
//! lane, a fleet bound's key, the rate-limit service's descriptor. A bound
//! keyed on a value (user, org, token, account) counts the caller under
//! that value; without one (`per: address`, or the value is missing) under
//! the caller's network. The kind is hashed in first, and a byte that says
//! which of the two follows, so a value can never name the same counter as
//! a network or as another kind's value.

use crate::config::plan::Prefixes;
use crate::config::Per;
use crate::identity::address::network;
use crate::identity::Identity;
use siphasher::sip128::{Hash128, Hasher128};
use std::hash::Hasher;

/// What named the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    Value,
    Network,
}

/// The value a bound keyed `per` reads from the caller's identity; `None`:
/// the network names the caller. Accounts are read from the request, not
/// from an identity (installation bounds: the caller gives its own).
pub(crate) fn value_of<'a>(
    per: Per,
    identity: Option<&'a Identity>,
    model: Option<&'a str>,
) -> Option<&'a str> {
    match per {
        Per::Route | Per::Address | Per::Account => None,
        Per::User => identity.and_then(|i| i.user.as_deref()),
        Per::Org => identity.and_then(|i| i.org.as_deref()),
        Per::Token => identity.and_then(|i| i.token.as_deref()),
        Per::Model => model,
    }
}

/// Feeds `h` what names a caller for a bound keyed `per`.
fn feed<H: Hasher>(
    h: &mut H,
    per: Per,
    value: Option<&str>,
    address: &str,
    prefixes: Prefixes,
) -> Named {
    h.write(per.as_str().as_bytes());
    match value {
        Some(v) => {
            h.write_u8(1);
            h.write(v.as_bytes());
            Named::Value
        }
        None => {
            h.write_u8(0);
            network(address, prefixes).hash_into(h);
            Named::Network
        }
    }
}

/// The 64-bit key of a caller in a lane (node and fleet bounds).
pub(crate) fn key64(
    keys: [u64; 2],
    per: Per,
    value: Option<&str>,
    address: &str,
    prefixes: Prefixes,
) -> u64 {
    let mut h = siphasher::sip::SipHasher13::new_with_keys(keys[0], keys[1]);
    feed(&mut h, per, value, address, prefixes);
    h.finish()
}

/// The 128-bit key of a caller at the rate-limit service, with what named
/// it (installation bounds: a descriptor value).
pub(crate) fn key128(
    keys: [u64; 2],
    per: Per,
    value: Option<&str>,
    address: &str,
    prefixes: Prefixes,
) -> (Named, Hash128) {
    let mut h = siphasher::sip128::SipHasher13::new_with_keys(keys[0], keys[1]);
    let named = feed(&mut h, per, value, address, prefixes);
    (named, h.finish128())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::address::network;

    /// The keys as they were written before this rule had one home: the
    /// counters in shared data and at the service are found by them, so
    /// they must not change under an upgrade.
    #[test]
    fn keys_are_the_ones_counters_were_stored_under() {
        let p = Prefixes::default();
        let seed = [7, 11];
        for (per, value, address) in [
            (Per::User, Some("alice"), "10.0.0.1"),
            (Per::Address, None, "10.0.0.1"),
            (Per::Token, None, "2001:db8::1"),
        ] {
            let mut old = siphasher::sip::SipHasher13::new_with_keys(seed[0], seed[1]);
            old.write(per.as_str().as_bytes());
            match value {
                Some(v) => {
                    old.write_u8(1);
                    old.write(v.as_bytes());
                }
                None => {
                    old.write_u8(0);
                    network(address, p).hash_into(&mut old);
                }
            }
            assert_eq!(key64(seed, per, value, address, p), old.finish());

            let mut old = siphasher::sip128::SipHasher13::new_with_keys(seed[0], seed[1]);
            old.write(per.as_str().as_bytes());
            old.write_u8(u8::from(value.is_some()));
            match value {
                Some(v) => old.write(v.as_bytes()),
                None => network(address, p).hash_into(&mut old),
            }
            let (named, k) = key128(seed, per, value, address, p);
            assert_eq!((k.h1, k.h2), (old.finish128().h1, old.finish128().h2));
            assert_eq!(named == Named::Value, value.is_some());
        }
    }

    #[test]
    fn a_value_never_names_the_counter_of_a_network_or_of_another_kind() {
        let p = Prefixes::default();
        let k = |per, v| key64([1, 2], per, v, "10.0.0.1", p);
        assert_ne!(k(Per::User, Some("10.0.0.1")), k(Per::User, None));
        assert_ne!(k(Per::User, Some("alice")), k(Per::Org, Some("alice")));
        assert_ne!(k(Per::User, None), k(Per::Address, None));
        // The network, not the address: one /64 is one IPv6 caller.
        assert_eq!(
            key64([1, 2], Per::Address, None, "2001:db8::1", p),
            key64([1, 2], Per::Address, None, "2001:db8::2", p)
        );
    }

    #[test]
    fn each_kind_reads_its_own_part_of_the_identity() {
        let id = Identity {
            user: Some("u".into()),
            org: Some("o".into()),
            token: Some("t".into()),
            ..Identity::default()
        };
        assert_eq!(value_of(Per::User, Some(&id), None), Some("u"));
        assert_eq!(value_of(Per::Org, Some(&id), None), Some("o"));
        assert_eq!(value_of(Per::Token, Some(&id), None), Some("t"));
        for per in [Per::Route, Per::Address, Per::Account] {
            assert_eq!(value_of(per, Some(&id), None), None);
        }
        assert_eq!(value_of(Per::User, None, None), None);
    }
}
