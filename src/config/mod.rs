//! Configuration, in two rooms: [`written`], what users write (Envoy
//! `configuration`, Istio `pluginConfig`) read by [`parse`] and checked with
//! JSON paths, and [`plan`], the compiled form the request path and the
//! console read. The filter and the CLI both go through [`parse`]; nothing
//! else reads configuration text. `written` never names `plan`
//! (tests/layers.rs).
//!
//! [`operations`] and [`normalize`] read a request as the matchers compare
//! it (OpenAPI operations, request paths and hosts); both rooms use them.
//! The shared-data key budget windows and bounds are checked against is
//! [`crate::count::budget`].

pub mod normalize;
pub mod operations;
pub mod plan;
pub mod written;

pub use written::*;
