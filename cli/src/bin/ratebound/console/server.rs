//! The HTTP side: one request at a time (one person's browser), every
//! request checked before it is read. Safe by default:
//! - the `Host` must be the address listened on (a page of another site
//!   that rebinds its name to 127.0.0.1 is refused);
//! - a request with an `Origin` (or `Sec-Fetch-Site`) from elsewhere is
//!   refused: 403;
//! - every `/api/` request carries the run's token (printed in the URL) in
//!   `X-Ratebound-Token`, and every write is a POST of JSON;
//! - bodies are capped (413) and a malformed one is a 400, never a crash;
//! - the only file written is FILE ([`super::edit`]).

use super::assets;
use super::edit::State;
use super::live::Live;
use serde_json::{json, Value};
use std::io::Read;
use std::net::SocketAddr;

/// A configuration is at most 1 MiB; its JSON in a request, with room.
pub const MAX_BODY: usize = 2 << 20;
/// An OpenAPI document read on the page: as `ratebound openapi` reads.
pub const MAX_DOCUMENT_BODY: usize = ratebound_cli::openapi::MAX_DOCUMENT_BYTES + (1 << 20);

/// Who may talk to the server: the hosts it answers to and the run's token.
pub struct Guard {
    addr: SocketAddr,
    hosts: Vec<String>,
    token: String,
}

impl Guard {
    pub fn new(addr: SocketAddr, token: String) -> Guard {
        let port = addr.port();
        let mut hosts = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            for h in ["127.0.0.1", "localhost", "[::1]"] {
                let h = format!("{h}:{port}");
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        Guard { addr, hosts, token }
    }

    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.addr, self.token)
    }

    fn host_ok(&self, host: Option<&str>) -> bool {
        host.is_some_and(|h| self.hosts.iter().any(|a| a.eq_ignore_ascii_case(h)))
    }

    fn origin_ok(&self, origin: Option<&str>, fetch_site: Option<&str>) -> bool {
        let same = origin.is_none_or(|o| {
            o.strip_prefix("http://")
                .is_some_and(|h| self.hosts.iter().any(|a| a.eq_ignore_ascii_case(h)))
        });
        // Browsers say where a request comes from; none but ours is welcome.
        let site = fetch_site.is_none_or(|s| matches!(s, "same-origin" | "none"));
        same && site
    }

    fn token_ok(&self, token: Option<&str>) -> bool {
        // Compared in full whatever the first difference (no timing hint).
        token.is_some_and(|t| {
            t.len() == self.token.len()
                && t.bytes()
                    .zip(self.token.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        })
    }
}

/// 128 bits from the operating system's generator, as hex.
pub fn token() -> String {
    let mut bytes = [0u8; 16];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !filled {
        // No /dev/urandom: std's per-process random hasher keys.
        use std::hash::{BuildHasher, Hasher};
        for chunk in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            for (b, x) in chunk.iter_mut().zip(h.finish().to_le_bytes()) {
                *b = x;
            }
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A request as the handler sees it.
pub struct Request {
    pub method: String,
    pub path: String,
    pub host: Option<String>,
    pub origin: Option<String>,
    pub fetch_site: Option<String>,
    pub token: Option<String>,
    pub content_type: Option<String>,
    /// None: larger than the cap for its path (not read).
    pub body: Option<Vec<u8>>,
}

pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

fn json_response(status: u16, v: &Value) -> Response {
    Response {
        status,
        content_type: "application/json",
        body: v.to_string().into_bytes(),
    }
}

fn refuse(status: u16, message: &str) -> Response {
    json_response(status, &json!({ "error": message }))
}

/// The cap on a request's body by its path.
pub fn body_cap(path: &str) -> usize {
    if path == "/api/openapi" {
        MAX_DOCUMENT_BODY
    } else {
        MAX_BODY
    }
}

/// Answers one request.
pub fn handle(guard: &Guard, state: &mut State, live: &mut Live, r: &Request) -> Response {
    if !guard.host_ok(r.host.as_deref()) {
        return refuse(403, "this server answers to its own address only (Host)");
    }
    if !guard.origin_ok(r.origin.as_deref(), r.fetch_site.as_deref()) {
        return refuse(403, "cross-origin requests are refused");
    }
    let Some(api) = r.path.strip_prefix("/api/") else {
        if r.method != "GET" && r.method != "HEAD" {
            return refuse(405, "the page's files are read with GET");
        }
        return match assets::get(&r.path) {
            Some((content_type, body)) => Response {
                status: 200,
                content_type,
                body: body.to_vec(),
            },
            None => refuse(404, "no such page"),
        };
    };
    if !guard.token_ok(r.token.as_deref()) {
        return refuse(403, "a wrong or missing token (X-Ratebound-Token): use the URL printed by `ratebound console`");
    }
    match (r.method.as_str(), api) {
        ("GET", "state") => json_response(200, &state.describe(live.admins())),
        ("GET", "live") => json_response(200, &live.read()),
        ("POST", "preview" | "save" | "export" | "openapi") => {
            if !r.content_type.as_deref().is_some_and(|c| {
                c.split(';')
                    .next()
                    .is_some_and(|t| t.trim() == "application/json")
            }) {
                return refuse(415, "send JSON (Content-Type: application/json)");
            }
            let Some(body) = &r.body else {
                return refuse(413, "the request body is larger than this server reads");
            };
            let v: Value = match serde_json::from_slice(body) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => return refuse(400, "send a JSON object"),
                Err(e) => return refuse(400, &format!("not JSON: {e}")),
            };
            let (status, answer) = match api {
                "preview" => state.preview(&v),
                "save" => state.save(&v),
                "export" => state.export(&v),
                _ => state.openapi(&v),
            };
            json_response(status, &answer)
        }
        (_, "state" | "live" | "preview" | "save" | "export" | "openapi") => {
            refuse(405, "wrong method for this request")
        }
        _ => refuse(404, "no such request"),
    }
}

/// Serves until the process is stopped.
pub fn serve(http: &tiny_http::Server, guard: &Guard, mut state: State, mut live: Live) {
    for mut rq in http.incoming_requests() {
        let header = |name: &str| {
            rq.headers()
                .iter()
                .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
                .map(|h| h.value.as_str().to_string())
        };
        let url = rq.url().to_string();
        let path = url.split(['?', '#']).next().unwrap_or_default().to_string();
        let cap = body_cap(&path);
        let mut r = Request {
            method: rq.method().as_str().to_ascii_uppercase(),
            host: header("host"),
            origin: header("origin"),
            fetch_site: header("sec-fetch-site"),
            token: header("x-ratebound-token"),
            content_type: header("content-type"),
            path,
            body: None,
        };
        // A body announced larger than the cap is not read at all.
        let announced = rq.body_length().unwrap_or(0);
        if announced <= cap {
            let mut body = Vec::new();
            let read = rq
                .as_reader()
                .take(cap as u64 + 1)
                .read_to_end(&mut body)
                .is_ok();
            if read && body.len() <= cap {
                r.body = Some(body);
            }
        }
        let answer = handle(guard, &mut state, &mut live, &r);
        let mut response =
            tiny_http::Response::from_data(answer.body).with_status_code(answer.status);
        for (k, v) in [
            ("Content-Type", answer.content_type),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("X-Frame-Options", "DENY"),
            ("Referrer-Policy", "no-referrer"),
            (
                "Content-Security-Policy",
                "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; \
                 img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
            ),
        ] {
            if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                response.add_header(h);
            }
        }
        let _ = rq.respond(response);
    }
}
