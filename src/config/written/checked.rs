//! A configuration that passed every check, with the values the checks
//! read kept typed: compiling it reads these and parses nothing again, so
//! nothing is left that can fail there.

use super::{CostSource, Shape, Unit, WrittenConfig};
use crate::config::operations::Segment;
use std::ops::Deref;

/// A configuration [`parse`](super::parse) accepted: what was written (read
/// through `Deref`) and, beside it, what its checks found, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    written: WrittenConfig,
    checked: Checked,
}

impl Config {
    pub(super) fn new(written: WrittenConfig, checked: Checked) -> Config {
        Config { written, checked }
    }

    /// The configuration as written.
    pub fn written(&self) -> &WrittenConfig {
        &self.written
    }

    /// What its checks found, typed.
    pub fn checked(&self) -> &Checked {
        &self.checked
    }
}

impl Deref for Config {
    type Target = WrittenConfig;

    fn deref(&self) -> &WrittenConfig {
        &self.written
    }
}

/// The typed values of a whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// Leading bits of an IPv4 address that name a caller (1 to 32).
    pub ipv4_prefix: u8,
    /// Leading bits of an IPv6 address that name a caller (1 to 128).
    pub ipv6_prefix: u8,
    /// Each route's, in the written order.
    pub routes: Vec<CheckedRoute>,
}

/// A route's typed values.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedRoute {
    /// Its own bounds', in the written order.
    pub bounds: Vec<CheckedBound>,
    /// Its operations', in the written order.
    pub operations: Vec<CheckedOperation>,
}

/// An operation's typed values.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedOperation {
    /// Its path template, parsed.
    pub template: Vec<Segment>,
    pub bounds: Vec<CheckedBound>,
}

/// A bound's typed values.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedBound {
    /// 1 to `u32::MAX`.
    pub limit: u32,
    /// The window, in milliseconds.
    pub window_ms: u64,
    /// Where it is counted.
    pub counted: CheckedScope,
    /// The share of its refusals carried out: its own, the configuration's,
    /// or 100.
    pub enforce_percent: u8,
    pub cost: Option<CheckedCost>,
}

/// Where a bound is counted (its written `Scope`), with what that scope
/// needs: the compiled `BoundScope` is made from it without a fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckedScope {
    Node,
    Fleet,
    /// By the rate-limit service, in its clock windows of this unit, with
    /// this shape.
    Installation(Unit, Shape),
}

/// A cost's typed values: where it is read, and its reservations (each at
/// most the bound's limit).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedCost {
    pub source: CostSource,
    pub reserve: Option<u32>,
    pub reserve_floor: Option<u32>,
    pub reserve_ceiling: Option<u32>,
}
