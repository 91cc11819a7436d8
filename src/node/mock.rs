//! A [`NodeHost`] that records every call, over the request path's
//! [`MockHost`] (its store, clock and properties): a root context's life
//! runs natively, and what it asked of the host can be read back. Several
//! nodes over one host are several root contexts of one Envoy.

use super::{NodeHost, NodeStat, NodeStats, RootState};
use crate::config::plan::Plan;
use crate::count::store::MemStore;
use crate::node::fleet_sync::Settled;
use crate::pipeline::mock::MockHost;
use crate::pipeline::{Base, CallOut, Level};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A call to the rate-limit service a node dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub token: u32,
    pub cluster: String,
    pub timeout_ms: u64,
    pub message: Vec<u8>,
}

impl Call {
    /// A warm-up call (`node::warm_up`), not a sync.
    pub fn is_warm_up(&self) -> bool {
        use prost::Message;
        crate::rls::proto::RateLimitRequest::decode(self.message.as_slice()).is_ok_and(|r| {
            r.descriptors
                .iter()
                .flat_map(|d| &d.entries)
                .any(|e| e.key == "ratebound" && e.value == "warm-up")
        })
    }
}

/// Stats of one configuration: what they count is kept on the host, with
/// the configuration's number (the order they were defined in).
pub struct MockStats {
    config: usize,
    seen: Rc<RefCell<Vec<(usize, NodeStat)>>>,
}

impl NodeStats for MockStats {
    fn count(&self, stat: NodeStat) {
        self.seen.borrow_mut().push((self.config, stat));
    }
}

#[derive(Default)]
pub struct MockNodeHost {
    /// The store, the clock (`pipe.now`) and properties; requests run on it.
    pub pipe: MockHost,
    /// The VM's environment.
    pub env: HashMap<String, String>,
    /// The host refuses to dispatch calls with this status.
    pub dispatch_error: Option<String>,
    /// The answer being handled, as Envoy hands it over: its headers
    /// (none for a call that got no answer), its `grpc-status` trailer (a
    /// service's answer) and its body (framed).
    pub answer_headers: Vec<(&'static str, String)>,
    pub answer_grpc_status: Option<u32>,
    pub answer_body: Option<Vec<u8>>,
    // What the nodes did:
    pub calls: Vec<Call>,
    pub tick_ms: Option<u64>,
    pub logs: Vec<(Level, String)>,
    stats: Rc<RefCell<Vec<(usize, NodeStat)>>>,
    configs: usize,
    next_token: u32,
    random: u64,
}

impl MockNodeHost {
    pub fn new(now: u64) -> MockNodeHost {
        MockNodeHost {
            pipe: MockHost::new(now),
            ..MockNodeHost::default()
        }
    }

    /// The calls dispatched since the last time, taken.
    pub fn take_calls(&mut self) -> Vec<Call> {
        std::mem::take(&mut self.calls)
    }

    /// What configuration `config` (0 the first defined) counted.
    pub fn stats_of(&self, config: usize) -> Vec<NodeStat> {
        let seen = self.stats.borrow();
        seen.iter()
            .filter(|(c, _)| *c == config)
            .map(|(_, s)| *s)
            .collect()
    }

    /// How many stats definitions (configurations put in force) so far.
    pub fn configs(&self) -> usize {
        self.configs
    }

    /// Logs at `level` that contain `text`.
    pub fn logged(&self, level: Level, text: &str) -> usize {
        let hit = |(l, m): &&(Level, String)| *l == level && m.contains(text);
        self.logs.iter().filter(hit).count()
    }

    /// `node`'s call `token` answered by the service with `grpc_status`
    /// (in the trailers) and `message` (unframed; framed as Envoy hands it
    /// over), through the node's entry for an answer.
    pub fn answer(
        &mut self,
        node: &mut RootState<MockStats>,
        token: u32,
        grpc_status: u32,
        message: &[u8],
    ) -> Option<Settled> {
        let framed = crate::rls::frame(message);
        let size = framed.len();
        self.answer_body = Some(framed);
        self.answer_headers = vec![(":status", "200".into())];
        self.answer_grpc_status = Some(grpc_status);
        node.on_answer(self, token, size)
    }

    /// `node`'s call `token` failed: no answer at all (`grpc_message`
    /// `None`: a timeout, a reset; Envoy gives no headers, and the status
    /// is read as UNAVAILABLE whatever `grpc_status` says), or Envoy's own
    /// trailers-only answer with `grpc_status` saying why.
    pub fn fail(
        &mut self,
        node: &mut RootState<MockStats>,
        token: u32,
        grpc_status: u32,
        grpc_message: Option<&str>,
    ) -> Option<Settled> {
        self.answer_body = None;
        self.answer_grpc_status = None;
        self.answer_headers = match grpc_message {
            Some(m) => vec![
                (":status", "200".into()),
                ("grpc-status", grpc_status.to_string()),
                ("grpc-message", m.to_string()),
            ],
            None => Vec::new(),
        };
        node.on_answer(self, token, 0)
    }
}

impl Base for MockNodeHost {
    type Store = MemStore;

    fn store(&self) -> &MemStore {
        &self.pipe.store
    }

    fn now_ms(&self) -> u64 {
        self.pipe.now
    }

    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>> {
        self.pipe.properties.get(&path.join(".")).cloned()
    }

    fn log(&mut self, level: Level, msg: &str) {
        self.logs.push((level, msg.into()));
    }

    /// Every call of a node is to the rate-limit service: its message is
    /// kept unframed.
    fn dispatch(&mut self, call: &CallOut) -> Result<u32, String> {
        if let Some(e) = &self.dispatch_error {
            return Err(e.clone());
        }
        let message =
            crate::rls::unframe(call.body.unwrap_or_default()).map_err(|e| e.to_string())?;
        self.next_token += 1;
        self.calls.push(Call {
            token: self.next_token,
            cluster: call.cluster.into(),
            timeout_ms: call.timeout_ms,
            message: message.to_vec(),
        });
        Ok(self.next_token)
    }

    /// Only what `answered` reads: a failed call's `grpc-message`.
    fn answer_header(&self, name: &str) -> Option<String> {
        let found = self.answer_headers.iter().find(|(k, _)| *k == name);
        found.map(|(_, v)| v.clone())
    }

    fn answer_trailer(&self, name: &str) -> Option<String> {
        (name == "grpc-status")
            .then(|| self.answer_grpc_status.map(|s| s.to_string()))
            .flatten()
    }

    fn answer_body(&self, size: usize) -> Option<Vec<u8>> {
        let body = self.answer_body.as_ref()?;
        Some(body.iter().take(size).copied().collect())
    }
}

impl NodeHost for MockNodeHost {
    type Stats = MockStats;

    fn random(&mut self) -> [u64; 2] {
        self.random += 1;
        [self.random, !self.random]
    }

    fn env_var(&self, name: &str) -> Option<String> {
        self.env.get(name).cloned()
    }

    fn define_stats(&mut self, _plan: &Plan) -> MockStats {
        self.configs += 1;
        MockStats {
            config: self.configs - 1,
            seen: Rc::clone(&self.stats),
        }
    }

    fn set_tick_period(&mut self, ms: u64) {
        self.tick_ms = Some(ms);
    }
}
