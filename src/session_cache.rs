//! Identities answered by the session service, per credential, for a
//! configured time, in a bounded map. Credentials are kept only as a keyed
//! 128-bit hash: the cache never holds a secret.

use crate::identity::Identity;
use siphasher::sip128::{Hasher128, SipHasher13};
use std::collections::{HashMap, VecDeque};
use std::hash::Hasher;

pub struct SessionCache {
    entries: HashMap<u128, (Identity, u64)>,
    /// Insertion order, for evicting the oldest when full.
    order: VecDeque<u128>,
    capacity: usize,
    ttl_ms: u64,
}

/// The cache key of a credential (`seed` is the installation's).
pub fn credential_key(seed: [u64; 2], credential: &str) -> u128 {
    let mut h = SipHasher13::new_with_keys(seed[1], seed[0]);
    h.write(credential.as_bytes());
    h.finish128().as_u128()
}

impl SessionCache {
    pub fn new(capacity: usize, ttl_ms: u64) -> SessionCache {
        SessionCache {
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
        if self.ttl_ms == 0 {
            return;
        }
        if self
            .entries
            .insert(key, (id, now_ms + self.ttl_ms))
            .is_none()
        {
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
        // Keep the order queue from outgrowing the map (re-inserted keys).
        if self.order.len() > 2 * self.capacity {
            self.order.retain(|k| self.entries.contains_key(k));
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
        let mut c = SessionCache::new(3, 1_000);
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
    fn a_zero_ttl_caches_nothing() {
        let mut c = SessionCache::new(3, 0);
        c.insert(1, id("a"), 0);
        assert!(c.is_empty());
    }
}
