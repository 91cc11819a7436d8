//! Test support: an in-memory [`Store`] with Envoy's shared-data semantics
//! (one global cas counter, absent keys read as `(None, None)`, keys never
//! deleted), which also counts its calls and fails on request.

use crate::count::store::{Store, StoreError, StoreOp, Versioned};
use std::cell::RefCell;
use std::collections::HashMap;

/// In-memory store with Envoy's semantics: one global cas counter.
#[derive(Default)]
pub struct MemStore {
    inner: RefCell<MemInner>,
}

#[derive(Default)]
struct MemInner {
    map: HashMap<String, (Vec<u8>, u32)>,
    next_cas: u32,
    /// Test hook: fail this many upcoming calls.
    fail_next: usize,
    /// Successful writes, stale writes and reads so far.
    sets: usize,
    stale_sets: usize,
    gets: usize,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn key_count(&self) -> usize {
        self.inner.borrow().map.len()
    }

    /// Every key and value, sorted: compare two to see what a call wrote.
    pub fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<_> = self
            .inner
            .borrow()
            .map
            .iter()
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect();
        all.sort();
        all
    }

    /// Makes the next `n` calls fail, as a broken host would.
    pub fn fail_next(&self, n: usize) {
        self.inner.borrow_mut().fail_next = n;
    }

    /// Number of successful writes so far.
    pub fn writes(&self) -> usize {
        self.inner.borrow().sets
    }

    /// Number of writes refused for a stale cas so far.
    pub fn stale_writes(&self) -> usize {
        self.inner.borrow().stale_sets
    }

    /// Number of reads so far.
    pub fn reads(&self) -> usize {
        self.inner.borrow().gets
    }

    /// A failure as a broken host gives it, when one was asked for.
    fn check_fail(inner: &mut MemInner, op: StoreOp, key: &str) -> Result<(), StoreError> {
        if inner.fail_next > 0 {
            inner.fail_next -= 1;
            return Err(StoreError::Host {
                op,
                key: key.to_string(),
                status: "injected".to_string(),
            });
        }
        Ok(())
    }
}

impl Store for MemStore {
    fn get(&self, key: &str) -> Result<Versioned, StoreError> {
        let mut inner = self.inner.borrow_mut();
        Self::check_fail(&mut inner, StoreOp::Get, key)?;
        inner.gets += 1;
        Ok(match inner.map.get(key) {
            Some((v, cas)) => (Some(v.clone()), Some(*cas)),
            None => (None, None),
        })
    }

    fn set(&self, key: &str, value: &[u8], cas: Option<u32>) -> Result<bool, StoreError> {
        let mut inner = self.inner.borrow_mut();
        Self::check_fail(&mut inner, StoreOp::Set, key)?;
        if let (Some(want), Some((_, have))) = (cas, inner.map.get(key)) {
            if want != *have {
                inner.stale_sets += 1;
                return Ok(false);
            }
        }
        // 0 means "no cas" at the proxy-wasm ABI: never hand it out.
        inner.next_cas = inner.next_cas.wrapping_add(1).max(1);
        let cas = inner.next_cas;
        inner.map.insert(key.to_string(), (value.to_vec(), cas));
        inner.sets += 1;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_asked_for_is_a_host_failure_of_that_call() {
        let s = MemStore::new();
        s.fail_next(2);
        assert_eq!(
            s.get("k"),
            Err(StoreError::Host {
                op: StoreOp::Get,
                key: "k".into(),
                status: "injected".into()
            })
        );
        assert!(matches!(
            s.set("j", b"1", None),
            Err(StoreError::Host {
                op: StoreOp::Set,
                ..
            })
        ));
        assert_eq!(s.get("k"), Ok((None, None)));
    }
}
