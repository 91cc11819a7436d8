//! A configuration put in force: parsed, compiled, registered in the lane
//! directory, every bound bound to its lane.

use super::host::NodeHost;
use crate::config;
use crate::config::plan::BoundTable;
use crate::config::plan::Plan;
use crate::count::directory;
use crate::count::lane::{Lane, Table};
use crate::count::store::{Store, StoreError};
use crate::pipeline::limiter::{lanes_for, Limiter};
use crate::pipeline::owed::Owed;
use crate::pipeline::{Level, Memories, Worker};
use crate::reading;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A configuration in force: the limiter, its stats, the session cache.
pub struct Active<S> {
    pub limiter: Limiter,
    /// Its generation in the lane directory.
    pub gen: u64,
    /// Forgotten by the directory while superseded: its lanes may be
    /// another bound's now, so it counts nothing more.
    pub orphaned: Cell<bool>,
    pub stats: S,
    memories: Memories,
}

impl<S> Active<S> {
    pub fn worker(&self) -> Worker<'_> {
        self.memories.worker(&self.limiter)
    }
}

/// Why a configuration could not be put in force.
#[derive(Debug)]
pub enum ConfigureError {
    /// One problem in the configuration (it names the JSON path).
    Config(config::ConfigError),
    Lanes(directory::RegisterError),
    /// The directory assigned fewer lanes than the plan has bounds.
    ShortAssignment,
    SharedData(StoreError),
}

impl std::fmt::Display for ConfigureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigureError::Config(e) => e.fmt(f),
            ConfigureError::Lanes(e) => e.fmt(f),
            ConfigureError::ShortAssignment => {
                f.write_str("lane assignment is shorter than the plan")
            }
            ConfigureError::SharedData(e) => write!(f, "shared data: {e}"),
        }
    }
}

/// Parses, compiles, and binds every bound to its lane (caller tables of
/// `table`'s size) in shared data; its requests owe costs to `owed`.
pub(crate) fn activate<H: NodeHost>(
    host: &mut H,
    bytes: &[u8],
    table: Table,
    owed: Rc<RefCell<Owed>>,
) -> Result<Active<H::Stats>, Vec<ConfigureError>> {
    let config = config::parse(bytes).map_err(|es| {
        es.into_iter()
            .map(ConfigureError::Config)
            .collect::<Vec<_>>()
    })?;
    let mut plan = Plan::compile(&config);
    // A secret named by `env` is the VM's environment variable (WASI).
    plan.key_secret = config::resolve_key_secret(&config, |name| host.env_var(name))
        .map_err(|e| vec![ConfigureError::Config(e)])?;
    plan.also_key_secret =
        config::resolve_also_read(&config, plan.key_secret.as_ref(), |name| host.env_var(name))
            .map_err(|e| vec![ConfigureError::Config(e)])?;
    let (now, seed) = (host.now_ms(), host.random());
    let resolved = directory::register(
        host.store(),
        &plan.instance,
        plan.hash,
        &plan.wants(),
        now,
        seed,
    )
    .map_err(|e| vec![ConfigureError::Lanes(e)])?;
    let gen = resolved.registered.gen;
    if resolved.registered.first {
        // Once per configuration, by the first VM to see it.
        host.log(
            Level::Info,
            &format!(
                "ratebound lanes: instance {:?} is generation {gen}; this vm_id has {} \
                 configurations alive and {} shared-data keys (budget {})",
                plan.instance,
                resolved.alive,
                resolved.keys,
                crate::count::budget::VM_KEYS
            ),
        );
        for w in reading::warnings(&plan, None) {
            if w.level == reading::Severity::Warning {
                host.log(
                    Level::Warn,
                    &format!("ratebound configuration warning: {w}"),
                );
            }
        }
    }
    let all = bind_lanes(host.store(), &plan, &resolved.registered.assigned, table).inspect_err(
        |_| {
            let _ = directory::leave(host.store(), gen);
        },
    )?;
    let stats = host.define_stats(&plan);
    let memories = Memories::new(plan.identity.as_ref(), owed);
    Ok(Active {
        limiter: Limiter::new(plan, all, resolved.seed),
        gen,
        orphaned: Cell::new(false),
        stats,
        memories,
    })
}

/// Each bound's lane, its keys created where they are not yet: the first VM
/// to bind a new caller table creates its keys (the tracked count last);
/// every other VM reads that one key.
fn bind_lanes<S: Store>(
    store: &S,
    plan: &Plan,
    assigned: &[directory::Assigned],
    table: Table,
) -> Result<BoundTable<Option<Lane>>, Vec<ConfigureError>> {
    let store_err = |e: StoreError| vec![ConfigureError::SharedData(e)];
    lanes_for(plan, |n, bound| {
        let a = assigned
            .get(n)
            .ok_or_else(|| vec![ConfigureError::ShortAssignment])?;
        let lane = crate::pipeline::limiter::bound_lane(
            bound,
            &directory::lane_prefix(a.lane),
            a.tag,
            table,
        );
        if a.new_table {
            lane.create_new_keys(store).map_err(store_err)?;
        } else if store.get(lane.last_key()).map_err(store_err)?.0.is_none() {
            lane.create_keys(store).map_err(store_err)?;
        }
        Ok(lane)
    })
}
