//! The configuration as users write it (Envoy `configuration`, Istio
//! `pluginConfig`): serde types, then a validation pass that reports every
//! problem with its JSON path and what would be valid. The filter and the CLI
//! both go through [`parse`]; nothing else reads configuration text.
//!
//! - [`model`]: the serde types;
//! - [`validate`]: [`parse`] and every check, with JSON paths;
//! - [`plan`]: the compiled form the request path reads;
//! - [`operations`], [`normalize`]: OpenAPI operations and request paths as
//!   the matchers compare them;
//! - [`duration`]: windows as written (the shared-data key budget they are
//!   checked against is [`crate::count::budget`]).

pub mod bound_table;
pub mod cost;
pub mod duration;
pub mod error;
pub mod installation;
pub mod model;
pub mod names;
pub mod normalize;
pub mod operations;
pub mod plan;
pub mod validate;

pub use error::ConfigError;
pub use model::*;
pub use validate::*;
