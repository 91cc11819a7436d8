//! `ratebound top`: a running Envoy's ratebound stats as rates.

use crate::args::{self, Format};
use crate::output::{err, out, pretty, USAGE, VALID};

/// `ratebound top`: two samples of the admin endpoint's stats, as rates.
pub fn run(t: &args::Top) -> u8 {
    use ratebound::console::top as view;
    use std::io::IsTerminal;
    use std::time::{Duration, Instant};
    let address = match view::admin_address(&t.admin) {
        Ok(a) => a,
        Err(e) => {
            err(&format!("ratebound top: {e}\n"));
            return USAGE;
        }
    };
    let timeout = Duration::from_secs(5);
    let sample = || {
        view::fetch(&address, timeout)
            .map(|text| (Instant::now(), view::parse_stats(&text)))
            .map_err(|e| {
                err(&format!("ratebound top: {e}\n"));
                USAGE
            })
    };
    let interval = Duration::from_secs_f64(t.interval);
    let mut before = match sample() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let live = !t.once && std::io::stdout().is_terminal();
    loop {
        std::thread::sleep(interval);
        let after = match sample() {
            Ok(s) => s,
            Err(code) => return code,
        };
        let seconds = after.0.duration_since(before.0).as_secs_f64();
        let view = view::compute(&t.admin, &before.1, &after.1, seconds);
        match t.format {
            Format::Json => out(&pretty(&serde_json::to_value(&view).unwrap_or_default())),
            Format::Text if live => {
                // Home, clear, the view: refreshed in place.
                out(&format!(
                    "\x1b[H\x1b[2J{}(Ctrl-C to quit)\n",
                    view::text(&view, 0)
                ));
            }
            Format::Text => out(&view::text(&view, 0)),
        }
        if t.once || !live {
            return VALID;
        }
        before = after;
    }
}
