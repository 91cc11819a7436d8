//! `ratebound console FILE`: the screen of a configuration in the browser.
//! The page (console-web/page, with the core compiled to
//! wasm32-unknown-unknown in console-web) validates and reads as the user
//! types; this server only hands it FILE, writes FILE back, exports the
//! WasmPlugin manifest, reads OpenAPI documents and the Envoys' /stats.
//!
//! - [`server`]: the HTTP side and what keeps it safe (token, origin, host,
//!   body caps);
//! - [`edit`]: FILE, its save (diff, routes reset), the export, the
//!   OpenAPI inventories;
//! - [`keep`]: a YAML FILE's comments, order and quoting kept by a save
//!   (its changes applied to FILE's text);
//! - [`live`]: every `--admin`'s rates, per node and summed;
//! - [`assets`]: the page, embedded in the binary.

mod assets;
mod edit;
mod keep;
mod live;
mod server;

use crate::args;
use crate::output::{err, out, USAGE, VALID};

pub fn run(c: &args::Console) -> u8 {
    let state = match edit::State::load(c) {
        Ok(s) => s,
        Err(e) => {
            err(&format!("ratebound console: {e}\n"));
            return USAGE;
        }
    };
    let live = match live::Live::new(&c.admin) {
        Ok(l) => l,
        Err(e) => {
            err(&format!("ratebound console: {e}\n"));
            return USAGE;
        }
    };
    let http = match tiny_http::Server::http(c.listen) {
        Ok(s) => s,
        Err(e) => {
            err(&format!(
                "ratebound console: cannot listen on {}: {e}\n",
                c.listen
            ));
            return USAGE;
        }
    };
    let Some(addr) = http.server_addr().to_ip() else {
        err("ratebound console: not listening on an IP address\n");
        return USAGE;
    };
    if !addr.ip().is_loopback() {
        err(&format!(
            "ratebound console: warning: listening on {addr}, not a loopback address: \
             anyone who can reach it and has the URL's token can change {}\n",
            c.file
        ));
    }
    if !assets::built() {
        err(
            "ratebound console: the browser core was not built into this binary \
             (scripts/console-web.sh, then build again): the page says so\n",
        );
    }
    let guard = server::Guard::new(addr, server::token());
    out(&format!(
        "ratebound console: {} on {}\n{}\n",
        c.file,
        addr,
        guard.url()
    ));
    server::serve(&http, &guard, state, live);
    VALID
}
