//! The page, in the binary: nothing is fetched from elsewhere. The page's
//! own files are in the repository (console-web/page); the core's JS glue
//! and wasm are made by scripts/console-web.sh into console-web/pkg and
//! copied in by build.rs (empty when they were not built: the page then
//! says how to build them).

pub const INDEX: &str = include_str!("../../../../../console-web/page/index.html");
pub const SCRIPT: &str = include_str!("../../../../../console-web/page/console.js");
pub const STYLE: &str = include_str!("../../../../../console-web/page/console.css");
pub const CORE_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ratebound_console_web.js"));
pub const CORE_WASM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ratebound_console_web_bg.wasm"));

pub fn built() -> bool {
    !CORE_JS.is_empty() && !CORE_WASM.is_empty()
}

/// A static file by its URL path: content type and bytes.
pub fn get(path: &str) -> Option<(&'static str, &'static [u8])> {
    Some(match path {
        "/" | "/index.html" => ("text/html; charset=utf-8", INDEX.as_bytes()),
        "/console.js" => ("text/javascript; charset=utf-8", SCRIPT.as_bytes()),
        "/console.css" => ("text/css; charset=utf-8", STYLE.as_bytes()),
        // No icon: an empty answer rather than a 404 in the browser's log.
        "/favicon.ico" => ("image/x-icon", &[]),
        "/core/ratebound_console_web.js" if built() => ("text/javascript; charset=utf-8", CORE_JS),
        "/core/ratebound_console_web_bg.wasm" if built() => ("application/wasm", CORE_WASM),
        _ => return None,
    })
}
