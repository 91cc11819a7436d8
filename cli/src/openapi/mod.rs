//! `ratebound openapi`: an OpenAPI 3.0/3.1 document and a bounds file that
//! picks some of its operations become a route's `operations` in a filter
//! configuration. Only the operations picked: there is no default over the
//! whole inventory, and the filter never sees the document.
//!
//! The document is read in part: `openapi`, `servers`, and for each path
//! item its operations' `operationId` and `servers`; everything else
//! (schemas, descriptions, components) is skipped without being kept in
//! memory. A path item that is a `$ref` is not followed.
//!
//! The bounds file maps a pick to its bounds, the same bound objects as a
//! route's: a key is an `operationId`, or `"METHOD /path/template"` (a
//! method, one space, a path as the document writes it; parameter names
//! may differ). The configuration written goes through [`config::parse`]
//! before it is returned, and its errors are told against the bounds file.
//!
//! - [`document`]: what is read of the OpenAPI document;
//! - [`picks`]: the bounds file, and which operation each of its keys picks;
//! - [`generate`]: the picked operations written into a configuration,
//!   which goes through the filter's own parser.

mod document;
mod generate;
mod picks;
#[cfg(test)]
mod tests;

pub use document::{
    read_document, server_path, OpenapiDocument, OpenapiOperation, MAX_DOCUMENT_BYTES, METHODS,
};
pub use generate::{generate, Generated, OpenapiRequest};
pub use picks::{read_picks, Pick};

use ratebound::config;

/// One problem, named where it is: `shop.yaml paths["/orders"].post`,
/// Where (`bounds.json "payOrder"[0].limit`, `--route`) and what: the same
/// shape as a configuration error.
pub type Error = config::ConfigError;

fn error(at: impl Into<String>, message: impl Into<String>) -> Error {
    Error {
        path: at.into(),
        kind: config::ErrorKind::Invalid,
        message: message.into(),
    }
}
