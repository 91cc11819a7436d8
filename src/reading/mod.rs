//! Readings of a configuration: what the module, the CLI and the browser
//! say about it. Everything here reads the compiled
//! [`Plan`](crate::config::plan::Plan); the CLI's commands over it are the
//! CLI crate's (cli/).
//!
//! In the module too (the filter logs the warnings once at configure time):
//! - [`warnings`]: what is legal but probably not meant, with stable codes;
//! - [`words`]: bounds, windows and matches in plain words.
//!
//! Not in the module, but in the CLI and the browser's core (console-web),
//! the `web` feature:
//! - [`explain`]: every route's bounds grouped by phase, with the warnings
//!   beside them, as data (and as the JSON of `explain --format json`);
//! - [`line`]: each bound's reading in one line, the one read while typing;
//! - [`sharing`]: which bounds share one entry (one write), and why others
//!   do not;
//! - [`audience`]: a bound's `applies_to` as people write it ("partner
//!   and trial", "signed in"), read into the configuration's JSON;
//! - [`structure`]: every problem at once (the JSON Schema first, then the
//!   parser on what is left), in the configuration's words;
//! - [`schema`]: the configuration's JSON Schema (the `schema` feature).

pub mod warnings;
pub mod words;

// Never in the module, so they may index; warnings and words run in the
// module, under the ban.
#[cfg(feature = "web")]
pub mod audience;
#[cfg(feature = "web")]
#[allow(clippy::indexing_slicing)]
pub mod explain;
#[cfg(feature = "web")]
pub mod line;
#[cfg(feature = "schema")]
#[allow(clippy::indexing_slicing)]
pub mod schema;
#[cfg(feature = "web")]
pub mod sharing;
#[cfg(feature = "web")]
#[allow(clippy::indexing_slicing)]
pub mod structure;

pub use warnings::{warnings, Severity, Warning, WarningCode};
