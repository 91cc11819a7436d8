//! Identities per credential (a session the session service answered for,
//! a JWT jwt_authn verified), for a configured time, in a bounded map, one
//! per worker. Credentials are kept only as a keyed 128-bit hash: the
//! cache never holds a secret.

use crate::identity::Identity;
use siphasher::sip128::{Hasher128, SipHasher13};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::hash::Hasher;

pub struct IdentityCache {
    entries: HashMap<u128, (Identity, u64)>,
    /// Insertion order, for evicting the oldest when full.
    order: VecDeque<u128>,
    capacity: usize,
    ttl_ms: u64,
}

/// A worker's two identity caches for a configuration: session answers per
/// credential, and identities of verified JWTs per token. One not
/// configured caches nothing.
pub(crate) fn caches_for(
    identity: Option<&crate::config::IdentityConfig>,
) -> (RefCell<IdentityCache>, RefCell<IdentityCache>) {
    let cache = |sized: Option<(usize, u64)>| {
        let (entries, ttl_s) = sized.unwrap_or((1, 0));
        RefCell::new(IdentityCache::new(entries, ttl_s.saturating_mul(1_000)))
    };
    let sessions = identity
        .and_then(|i| i.session.as_ref())
        .map(|s| (s.cache_entries, s.cache_ttl_s));
    let tokens = identity
        .and_then(|i| i.jwt.as_ref())
        .map(|j| (j.cache_entries, j.cache_ttl_s));
    (cache(sessions), cache(tokens))
}

/// The cache key of a credential (`seed` is the installation's).
pub(crate) fn credential_key(seed: [u64; 2], credential: &str) -> u128 {
    let mut h = SipHasher13::new_with_keys(seed[1], seed[0]);
    h.write(credential.as_bytes());
    h.finish128().as_u128()
}

impl IdentityCache {
    pub fn new(capacity: usize, ttl_ms: u64) -> IdentityCache {
        IdentityCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            ttl_ms,
        }
    }

    pub fn get(&self, key: u128, now_ms: u64) -> Option<&Identity> {
        self.entries
            .get(&key)
            .filter(|(_, expires)| now_ms < *expires)
            .map(|(id, _)| id)
    }

    pub fn insert(&mut self, key: u128, id: Identity, now_ms: u64) {
        self.insert_until(key, id, now_ms, u64::MAX);
    }

    /// As `insert`, but forgotten at `until_ms` if that comes before the
    /// configured time is up (a token's expiry).
    pub(crate) fn insert_until(&mut self, key: u128, id: Identity, now_ms: u64, until_ms: u64) {
        // Nothing to remember with a ttl of 0 or a token already expired.
        let expires = now_ms.saturating_add(self.ttl_ms).min(until_ms);
        if expires <= now_ms {
            return;
        }
        // `order` holds the map's keys, oldest first: a key enters both at
        // once and leaves both at once.
        if self.entries.insert(key, (id, expires)).is_none() {
            self.order.push_back(key);
        }
        while self.entries.len() > self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.entries.remove(&old);
                }
                None => break,
            }
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(u: &str) -> Identity {
        Identity {
            user: Some(u.into()),
            ..Identity::default()
        }
    }

    #[test]
    fn answers_expire_and_the_map_stays_bounded() {
        let mut c = IdentityCache::new(3, 1_000);
        let k = |s: &str| credential_key([1, 2], s);
        c.insert(k("a"), id("a"), 0);
        assert_eq!(
            c.get(k("a"), 999).and_then(|i| i.user.clone()),
            Some("a".into())
        );
        assert!(c.get(k("a"), 1_000).is_none(), "expired");
        for n in 0..10 {
            c.insert(k(&format!("x{n}")), id("x"), 5);
        }
        assert_eq!(c.len(), 3);
        assert!(!c.is_empty());
        assert!(c.get(k("x9"), 6).is_some());
        assert!(c.get(k("x0"), 6).is_none(), "oldest evicted");
    }

    #[test]
    fn credentials_are_keyed_by_the_installation_seed() {
        assert_ne!(credential_key([1, 2], "tok"), credential_key([3, 4], "tok"));
        assert_ne!(
            credential_key([1, 2], "tok"),
            credential_key([1, 2], "tok2")
        );
    }

    #[test]
    fn a_token_is_forgotten_at_its_expiry_if_that_comes_first() {
        let mut c = IdentityCache::new(3, 60_000);
        c.insert_until(1, id("a"), 1_000, 5_000);
        assert!(c.get(1, 4_999).is_some());
        assert!(c.get(1, 5_000).is_none());
        // Already expired: not remembered at all, so it pushes out nothing.
        let mut full = IdentityCache::new(1, 60_000);
        full.insert(1, id("a"), 1_000);
        full.insert_until(2, id("b"), 1_000, 1_000);
        assert!(full.get(2, 1_000).is_none());
        assert!(full.get(1, 1_000).is_some(), "kept");
    }

    #[test]
    fn a_zero_ttl_caches_nothing() {
        let mut c = IdentityCache::new(3, 0);
        c.insert(1, id("a"), 0);
        assert!(c.is_empty());
    }
}
