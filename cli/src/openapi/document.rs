//! What is read of an OpenAPI document: its version, its operations
//! (method, path template, operationId, the servers that apply), and the
//! path items that are a `$ref`. The rest is skipped unread.

use super::{error, Error};
use crate::input::{self, Format};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// Largest OpenAPI document read. Real documents run to several MiB; only
/// the operations are kept, so memory stays small whatever the size.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// The methods of an OpenAPI 3.0/3.1 path item, in the order it lists them.
pub const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// An operation of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenapiOperation {
    /// In capitals.
    pub method: String,
    /// The path template as the document writes it.
    pub path: String,
    pub operation_id: Option<String>,
    /// The `servers` that apply to it (its own, its path item's, or the
    /// document's), as URLs with their variables' defaults put in.
    pub servers: Vec<Result<String, String>>,
}

impl OpenapiOperation {
    /// "POST /orders/{id}/pay (payOrder)".
    pub fn title(&self) -> String {
        ratebound::reading::words::operation(&self.method, &self.path, self.operation_id.as_deref())
    }
}

/// What is read of an OpenAPI document.
#[derive(Debug, Clone, Default)]
pub struct OpenapiDocument {
    pub version: String,
    pub operations: Vec<OpenapiOperation>,
    /// Path items that are a `$ref` (not followed).
    pub references: Vec<String>,
}

/// A map read in order, its duplicate keys kept (JSON allows them; they
/// are told as errors where it matters).
#[derive(Debug, Clone)]
pub(super) struct Ordered<T>(pub(super) Vec<(String, T)>);

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    v.push((k, m.next_value()?));
                }
                Ok(Ordered(v))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// `paths`: path items by template; `x-` extensions skipped.
#[derive(Debug, Default)]
struct Paths(Vec<(String, PathItem)>);

impl<'de> Deserialize<'de> for Paths {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Paths;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the Paths Object: path items by path template")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Paths, A::Error> {
                let mut v = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    if k.starts_with("x-") {
                        m.next_value::<IgnoredAny>()?;
                    } else {
                        let item = m.next_value()?;
                        v.push((k, item));
                    }
                }
                Ok(Paths(v))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Debug, Deserialize)]
struct RawDocument {
    openapi: Option<Value>,
    swagger: Option<IgnoredAny>,
    servers: Option<Vec<RawServer>>,
    paths: Option<Paths>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawServer {
    url: String,
    #[serde(default)]
    variables: Ordered<RawVariable>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawVariable {
    default: String,
}

#[derive(Debug, Default, Deserialize)]
struct PathItem {
    #[serde(rename = "$ref")]
    reference: Option<String>,
    servers: Option<Vec<RawServer>>,
    get: Option<RawOperation>,
    put: Option<RawOperation>,
    post: Option<RawOperation>,
    delete: Option<RawOperation>,
    options: Option<RawOperation>,
    head: Option<RawOperation>,
    patch: Option<RawOperation>,
    trace: Option<RawOperation>,
}

#[derive(Debug, Deserialize)]
struct RawOperation {
    #[serde(rename = "operationId")]
    operation_id: Option<String>,
    servers: Option<Vec<RawServer>>,
}

/// Reads an OpenAPI 3.0 or 3.1 document (JSON or YAML, at most
/// [`MAX_DOCUMENT_BYTES`]), keeping its operations only. `label` names the
/// file in errors.
pub fn read_document(bytes: &[u8], format: Format, label: &str) -> Result<OpenapiDocument, Error> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(error(
            label,
            format!(
                "larger than {MAX_DOCUMENT_BYTES} bytes (16 MiB), the most that is read of an OpenAPI document"
            ),
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| error(label, format!("not UTF-8 (byte {})", e.valid_up_to())))?;
    let raw: RawDocument = match format {
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let raw = serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let path = e.path().to_string();
                error(
                    if path == "." {
                        label.to_string()
                    } else {
                        format!("{label} {path}")
                    },
                    format!("not an OpenAPI document this can read: {}", e.inner()),
                )
            })?;
            de.end()
                .map_err(|e| error(label, format!("trailing characters: {e}")))?;
            raw
        }
        Format::Yaml => {
            serde_saphyr::from_str_with_options(text, input::document_options(MAX_DOCUMENT_BYTES))
                .map_err(|e| error(label, format!("not an OpenAPI document this can read: {e}")))?
        }
    };
    let version = match (&raw.openapi, &raw.swagger) {
        (Some(Value::String(s)), _) => s.clone(),
        (Some(Value::Number(n)), _) => n.to_string(),
        (Some(other), _) => {
            return Err(error(
                format!("{label} openapi"),
                format!("{other} is not a version; write e.g. \"3.1.0\""),
            ))
        }
        (None, Some(_)) => {
            return Err(error(
                label,
                "is a Swagger 2.0 document; only OpenAPI 3.0 and 3.1 are read (convert it first, e.g. with swagger2openapi)",
            ))
        }
        (None, None) => {
            return Err(error(
                label,
                "is not an OpenAPI document: it has no \"openapi\" version field",
            ))
        }
    };
    if !(version == "3.0"
        || version == "3.1"
        || version.starts_with("3.0.")
        || version.starts_with("3.1."))
    {
        return Err(error(
            format!("{label} openapi"),
            format!("OpenAPI {version} is not read; only 3.0 and 3.1 are"),
        ));
    }
    let top = servers(raw.servers.as_deref());
    let mut doc = OpenapiDocument {
        version,
        ..OpenapiDocument::default()
    };
    for (path, item) in raw.paths.unwrap_or_default().0 {
        if let Some(r) = &item.reference {
            doc.references.push(format!("{path} ($ref {r})"));
        }
        let item_servers = item.servers.as_deref().map(|s| servers(Some(s)));
        let ops = [
            item.get,
            item.put,
            item.post,
            item.delete,
            item.options,
            item.head,
            item.patch,
            item.trace,
        ];
        for (method, op) in METHODS.iter().zip(ops) {
            let Some(op) = op else { continue };
            let servers = match (&op.servers, &item_servers) {
                (Some(s), _) => servers(Some(s)),
                (None, Some(s)) => s.clone(),
                (None, None) => top.clone(),
            };
            doc.operations.push(OpenapiOperation {
                method: method.to_ascii_uppercase(),
                path: path.clone(),
                operation_id: op.operation_id,
                servers,
            });
        }
    }
    Ok(doc)
}

/// Server URLs with their variables' defaults put in; no servers is `/`.
fn servers(list: Option<&[RawServer]>) -> Vec<Result<String, String>> {
    match list {
        None | Some([]) => vec![Ok("/".to_string())],
        Some(list) => list.iter().map(server_url).collect(),
    }
}

fn server_url(s: &RawServer) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s.url.as_str();
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("server URL {:?} has an unclosed '{{'", s.url))?;
        let name = &after[..close];
        let value = s
            .variables
            .0
            .iter()
            .find(|(k, _)| k == name)
            .ok_or_else(|| {
                format!(
                    "server URL {:?} uses {{{name}}}, which it does not define",
                    s.url
                )
            })?;
        out.push_str(&value.1.default);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The path part of a server URL, without its trailing `/`: `""` for
/// `https://api.example.com`, `/v1` for `https://api.example.com/v1/`.
pub fn server_path(url: &str) -> Result<String, String> {
    let path = if let Some(at) = url.find("://") {
        let after = &url[at + 3..];
        after.find('/').map_or("", |p| &after[p..])
    } else if let Some(after) = url.strip_prefix("//") {
        after.find('/').map_or("", |p| &after[p..])
    } else if url.starts_with('/') {
        url
    } else {
        return Err(format!(
            "server URL {url:?} is relative to where the document is served; its path cannot be told"
        ));
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    Ok(path.trim_end_matches('/').to_string())
}
