//! The budget on shared-data keys: what one configuration, and everything
//! alive in one `vm_id`, may create.
//!
//! Keys can never be deleted and every key costs memory in every Envoy
//! that loads the module, so the numbers are fixed and checked twice: by
//! `config::parse` (the filter refuses the configuration and `ratebound
//! check` fails), and when a configuration is given lanes (a push that
//! would go over, counting what draining configurations still hold, is
//! refused; Envoy keeps the previous one).

use crate::count::lane::Table;

/// Keys of one caller table (a bound keyed per caller).
pub const TABLE_KEYS: u64 = Table::DEFAULT.keys() as u64;
/// Bounds in one configuration (each also defines five Envoy stats).
pub(crate) const CONFIG_BOUNDS: usize = 1_024;
/// Keys one configuration may need: 128 caller tables, and single
/// counters for the rest of its bounds.
pub const CONFIG_KEYS: u64 = 128 * TABLE_KEYS + CONFIG_BOUNDS as u64;
/// Keys all lanes of one `vm_id` may have created, across instances and
/// the configurations alive (in force and draining): four full ones.
pub(crate) const VM_KEYS: u64 = 4 * CONFIG_KEYS;
/// Lanes of one `vm_id`.
pub(crate) const LANES: usize = 4 * CONFIG_BOUNDS;
/// Configurations alive at once in one `vm_id` (in force and draining).
pub(crate) const LIVE_CONFIGURATIONS: usize = 64;

/// What a configuration needs: (caller tables, single counters).
pub fn keys_of(tables: usize, singles: usize) -> u64 {
    tables as u64 * TABLE_KEYS + singles as u64
}

/// A configuration that does not fit where it is being put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetError {
    /// The lanes of every configuration alive would create `keys` keys.
    VmKeys { keys: u64, alive: usize },
    /// Every one of the `lanes` lanes is in use.
    Lanes { lanes: usize, alive: usize },
    /// `alive` configurations are alive already.
    Alive { alive: usize },
}

const DRAINING: &str = "Envoy keeps a superseded configuration until its connections close \
     (up to --drain-time-s, 600 s by default): push again once they have drained, \
     lower the drain time, or change fewer bounds at once (an unchanged bound keeps its lane)";

impl std::fmt::Display for BudgetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetError::VmKeys { keys, alive } => write!(
                f,
                "this configuration would bring the shared-data keys of this vm_id to {keys}, \
                 over the budget of {VM_KEYS}, with {alive} configurations alive; {DRAINING}"
            ),
            BudgetError::Lanes { lanes, alive } => write!(
                f,
                "all {lanes} lanes of this vm_id are in use by {alive} configurations alive; \
                 {DRAINING}"
            ),
            BudgetError::Alive { alive } => write!(
                f,
                "{alive} configurations are alive in this vm_id already (at most \
                 {LIVE_CONFIGURATIONS}); {DRAINING}"
            ),
        }
    }
}
