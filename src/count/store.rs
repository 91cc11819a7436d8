//! The one door to counter storage: get and compare-and-swap set, with the
//! semantics Envoy's shared data has (docs/envoy-host.md): an absent key reads as
//! `(None, None)`, any set creates it, a stale cas is refused, keys are never
//! deleted. `MemStore` (test support) implements the same semantics for
//! native tests; the shared-data implementation lives in the host layer.

#[cfg(any(test, feature = "test-support"))]
pub use super::mem_store::MemStore;

/// Why a store operation gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The host refused the call (its status name): a failing host.
    Host {
        op: StoreOp,
        key: String,
        status: String,
    },
    /// Other writers changed `what` on every attempt: a busy counter, not
    /// a failing host.
    Contended { what: String, attempts: usize },
    /// A request the store was asked to do that cannot be done.
    Invalid(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    Get,
    Set,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Host { op, key, status } => {
                let op = match op {
                    StoreOp::Get => "get",
                    StoreOp::Set => "set",
                };
                write!(f, "{op} {key}: {status}")
            }
            StoreError::Contended { what, attempts } => write!(
                f,
                "{what}: still contended after {attempts} compare-and-swap attempts"
            ),
            StoreError::Invalid(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for StoreError {}

/// A value and the cas token to write it back with.
pub type Versioned = (Option<Vec<u8>>, Option<u32>);

pub trait Store {
    fn get(&self, key: &str) -> Result<Versioned, StoreError>;
    /// Writes `value` if `cas` is `None` or still current. `Ok(false)` on a
    /// stale cas: read again and recompute.
    fn set(&self, key: &str, value: &[u8], cas: Option<u32>) -> Result<bool, StoreError>;
    /// `get`, or the worker's memory of its own last write of `key`
    /// (`write_memory`), saying which. A remembered value is only good for
    /// a decision that is then written with its cas, which proves it right.
    fn recall(&self, key: &str) -> Result<(Versioned, bool), StoreError> {
        Ok((self.get(key)?, false))
    }
}

/// How many times one key's read-compute-write is retried on contention
/// before the operation gives up with an error (and the request fails open).
pub(crate) const CAS_RETRIES: usize = 32;

/// What one attempt of a compare-and-swap came to.
pub(crate) enum Attempt<T> {
    Done(T),
    /// Another writer won: try again.
    Stale,
}

/// The one compare-and-swap loop: `attempt` until it is done, at most
/// [`CAS_RETRIES`] times; then `what` names what stayed contended.
pub(crate) fn retry<T>(
    what: impl FnOnce() -> String,
    mut attempt: impl FnMut() -> Result<Attempt<T>, StoreError>,
) -> Result<T, StoreError> {
    for _ in 0..CAS_RETRIES {
        if let Attempt::Done(out) = attempt()? {
            return Ok(out);
        }
    }
    Err(StoreError::Contended {
        what: what(),
        attempts: CAS_RETRIES,
    })
}

/// Runs `f` on the current value of `key` and writes its result with
/// compare-and-swap, retrying on contention. `f` returns the value to write
/// (or `None` to write nothing) and the result to hand back.
pub fn update<S: Store + ?Sized, T>(
    store: &S,
    key: &str,
    mut f: impl FnMut(Option<&[u8]>) -> (Option<Vec<u8>>, T),
) -> Result<T, StoreError> {
    retry(
        || key.to_string(),
        || {
            let (value, cas) = store.get(key)?;
            let (new, out) = f(value.as_deref());
            let written = match new {
                None => true,
                Some(v) => store.set(key, &v, cas)?,
            };
            Ok(if written {
                Attempt::Done(out)
            } else {
                Attempt::Stale
            })
        },
    )
}

/// [`update`] that first tries what this worker remembers of `key`
/// ([`Store::recall`]): a write whose value it remembers needs no read.
/// When the memory is stale the write's cas fails, and when it leaves
/// nothing to write it may be wrong: both are decided again on a read.
pub(crate) fn update_recalled<S: Store + ?Sized, T>(
    store: &S,
    key: &str,
    mut f: impl FnMut(Option<&[u8]>) -> (Option<Vec<u8>>, T),
) -> Result<T, StoreError> {
    let ((value, cas), recalled) = store.recall(key)?;
    if recalled {
        if let (Some(v), out) = f(value.as_deref()) {
            if store.set(key, &v, cas)? {
                return Ok(out);
            }
        }
    }
    update(store, key, f)
}

/// Creates `key` empty unless it exists, so that later writes to it can all
/// be compare-and-swap (there is no atomic create-if-absent).
pub(crate) fn ensure<S: Store + ?Sized>(store: &S, key: &str) -> Result<(), StoreError> {
    match store.get(key)? {
        (Some(_), _) => Ok(()),
        (None, _) => store.set(key, &[], None).map(|_| ()),
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    /// Another writer wins every compare-and-swap.
    struct AlwaysStale(MemStore);

    impl Store for AlwaysStale {
        fn get(&self, key: &str) -> Result<Versioned, StoreError> {
            self.0.get(key)
        }
        fn set(&self, _: &str, _: &[u8], _: Option<u32>) -> Result<bool, StoreError> {
            Ok(false)
        }
    }

    #[test]
    fn a_contended_key_is_not_a_failing_host() {
        let s = AlwaysStale(MemStore::new());
        let e = update(&s, "k", |_| (Some(vec![1]), ())).unwrap_err();
        assert_eq!(
            e,
            StoreError::Contended {
                what: "k".into(),
                attempts: CAS_RETRIES
            }
        );
        assert_eq!(
            e.to_string(),
            "k: still contended after 32 compare-and-swap attempts"
        );
    }
}
