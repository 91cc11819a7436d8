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
//! The CLI only (`#[cfg(feature = "cli")]`, never in the module):
//! - [`explain`]: every route's bounds grouped by phase, with the warnings
//!   beside them, as data (and as the JSON of `explain --format json`);
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
//! - [`structure`]: every problem at once (the JSON Schema first, then the
//!   parser on what is left), in the configuration's words;
//! - [`top`]: a running Envoy's ratebound stats as rates (`ratebound top`);
//! - [`diff`]: which counters a push of one configuration over another
//!   resets, keeps, adds and drops (`ratebound diff`).

pub mod warnings;
pub mod words;

// The CLI may index (a panic there is a message and exit, not a dead
// worker); warnings and words run in the module, under the ban.
#[cfg(feature = "cli")]
pub mod diff;
#[cfg(feature = "cli")]
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
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod schema;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod snippet;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod source;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod structure;
#[cfg(feature = "cli")]
#[allow(clippy::indexing_slicing)]
pub mod top;

pub use warnings::{warnings, Code, Level, Warning};
