//! A request's phases, one file each, in the order a request meets them
//! (`steps.rs` runs them):
//!
//! - [`route`]: arrive: the route, what the plan reads of the request;
//! - [`cost`]: costs named up front, a body that sets its reservation,
//!   and what the response owes (its helpers under `cost/`);
//! - [`identity`]: who is calling (the sources), and the session answer;
//! - [`account`]: a sign-in's account, from the head or from the body;
//! - [`service`]: the rate-limit service's call and answer;
//! - [`reply`]: what a counted request comes to, and the local replies.

pub mod account;
pub mod cost;
pub mod identity;
pub mod reply;
pub mod route;
pub mod service;
