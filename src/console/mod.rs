//! The console: what the CLI and the filter's configure-time log say about a
//! configuration. Everything here reads the compiled
//! [`Plan`](crate::config::plan::Plan) (or, for `openapi`, writes a
//! configuration that [`crate::config::parse`] reads back); nothing here
//! parses configuration text except [`input`], which turns YAML into the
//! JSON that `parse` reads.
//!
//! In the module too (the filter logs the warnings once at configure time):
//! - [`warnings`]: what is legal but probably not meant, with stable codes;
//! - [`words`]: bounds, windows and matches in plain words.
//!
//! Not in the module, but in the browser's core too (console-web):
//! - [`explain`]: every route's bounds grouped by phase, with the warnings
//!   beside them, as data (and as the JSON of `explain --format json`);
//! - [`structure`], [`schema`] (the `web` feature, which `cli` includes).
//!
//! The CLI only (`#[cfg(feature = "cli")]`, never in the module):
//! - [`render`]: that explanation as text;
//! - [`input`]: reading files, YAML or JSON;
//! - [`openapi`]: an OpenAPI document and a bounds file into a route's
//!   `operations`;
//! - [`schema`]: the configuration's JSON Schema;
//! - [`snippet`]: an error drawn under its line of the file, caret at the
//!   column (annotate-snippets);
//! - [`source`]: the configurations in a file (a WasmPlugin's
//!   `pluginConfig`, the WasmPlugins of a YAML stream) and the line and
//!   column of every JSON path;
//! - [`stream`]: checks across everything one `check` reads (two
//!   WasmPlugins with one instance on the same workloads, a rate-limit
//!   service cluster no EnvoyFilter adds);
//! - [`structure`]: every problem at once (the JSON Schema first, then the
//!   parser on what is left), in the configuration's words;
//! - [`top`]: a running Envoy's ratebound stats as rates (`ratebound top`);
//! - [`yaml11`]: YAML as kubectl reads it (YAML 1.1), and where that
//!   differs from YAML 1.2.
//! - [`diff`]: which counters a push of one configuration over another
//!   resets, keeps, adds and drops (`ratebound diff`).

pub mod warnings;
pub mod words;

// The CLI may index (a panic there is a message and exit, not a dead
// worker); warnings and words run in the module, under the ban.
#[cfg(feature = "cli")]
pub mod diff;
// Also in the browser (console-web, the `web` feature): a projection of
// the plan, nothing the CLI alone has; never in the module.
#[cfg(any(feature = "cli", feature = "web"))]
#[allow(clippy::indexing_slicing)]
pub mod explain;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod input;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod openapi;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod render;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod rls_config;
#[cfg(feature = "schema")]
#[allow(clippy::indexing_slicing)]
pub mod schema;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod snippet;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod source;
#[cfg(feature = "cli")]
pub mod stream;
// `check`'s words, also in the browser (the `web` feature).
#[cfg(feature = "web")]
#[allow(clippy::indexing_slicing)]
pub mod structure;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod top;
#[cfg(feature = "cli")]
pub mod yaml11;

pub use warnings::{warnings, Severity, Warning, WarningCode};
