//! The console: what the CLI and the filter's configure-time log say about a
//! configuration that parsed. Everything here reads a [`Config`] that
//! [`crate::config::parse`] returned; nothing here parses configuration text
//! except [`input`], which turns YAML into the JSON that `parse` reads.
//!
//! - [`words`]: bounds, windows and matches in plain words;
//! - [`warnings`]: what is legal but probably not meant (pure, also used by
//!   the filter at configure time);
//! - [`explain`]: every route's bounds grouped by phase, with the warnings
//!   beside them, as data, as text ([`render`]) or as JSON;
//! - [`input`], [`openapi`] and [`schema`]: the CLI only (not compiled into
//!   the module); [`openapi`] turns an OpenAPI document and a bounds file
//!   into a route's `operations`.
//!
//! [`Config`]: crate::config::Config

pub mod explain;
#[cfg(not(target_arch = "wasm32"))]
pub mod input;
#[cfg(not(target_arch = "wasm32"))]
pub mod openapi;
pub mod render;
#[cfg(not(target_arch = "wasm32"))]
pub mod rls_config;
#[cfg(not(target_arch = "wasm32"))]
pub mod schema;
pub mod warnings;
pub mod words;

pub use warnings::{warnings, Code, Level, Warning};
