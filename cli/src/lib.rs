//! What only the CLI runs, over the core's readings
//! ([`ratebound::reading`]): everything here reads the compiled
//! [`Plan`](ratebound::config::plan::Plan) (or, for `openapi`, writes a
//! configuration that [`ratebound::config::parse`] reads back); nothing here
//! parses configuration text except [`input`], which turns YAML into the
//! JSON that `parse` reads.
//!
//! - [`render`]: `explain`'s explanation as text;
//! - [`input`]: reading files, YAML or JSON;
//! - [`openapi`]: an OpenAPI document and a bounds file into a route's
//!   `operations`;
//! - [`snippet`]: an error drawn under its line of the file, caret at the
//!   column (annotate-snippets);
//! - [`source`]: the configurations in a file (a WasmPlugin's
//!   `pluginConfig`, the WasmPlugins of a YAML stream) and the line and
//!   column of every JSON path;
//! - [`stream`]: checks across everything one `check` reads (two
//!   WasmPlugins with one instance on the same workloads, a rate-limit
//!   service cluster no EnvoyFilter adds);
//! - [`top`]: a running Envoy's ratebound stats as rates (`ratebound top`);
//! - [`yaml11`]: YAML as kubectl reads it (YAML 1.1), and where that
//!   differs from YAML 1.2;
//! - [`diff`]: which counters a push of one configuration over another
//!   resets, keeps, adds and drops (`ratebound diff`);
//! - [`rls_config`]: the rate-limit service's configuration for the
//!   installation bounds (`ratebound rls-config`).
//!
//! The page `ratebound console` serves is the binary's (`src/bin/ratebound/console/`).

pub mod diff;
pub mod input;
pub mod openapi;
pub mod render;
pub mod rls_config;
pub mod snippet;
pub mod source;
pub mod stream;
pub mod top;
pub mod yaml11;
