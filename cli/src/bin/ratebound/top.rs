//! `ratebound top`: a running Envoy's ratebound stats as rates.

use crate::args::{self, Format};
use crate::output::{err, out, pretty, USAGE, VALID};

/// `ratebound top`: two samples of the admin endpoint's stats, as rates.
pub fn run(t: &args::Top) -> u8 {
    use ratebound_cli::top as view;
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
    // q quits a live view read from a terminal; the terminal is restored
    // when `_raw` goes out of scope, however `run` returns.
    let (keys, raw) = if live && std::io::stdin().is_terminal() {
        let raw = RawTerminal::enter();
        (Some(quit_keys()), Some(raw))
    } else {
        (None, None)
    };
    let footer = match &raw {
        Some(r) if r.is_raw() => "(q to quit)",
        Some(_) => "(q and Enter to quit)",
        None => "(Ctrl-C to quit)",
    };
    loop {
        match &keys {
            Some(k) => match k.recv_timeout(interval) {
                Ok(()) => return VALID,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                // stdin closed: only Ctrl-C is left.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(interval)
                }
            },
            None => std::thread::sleep(interval),
        }
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
                out(&format!("\x1b[H\x1b[2J{}{footer}\n", view::text(&view, 0)));
            }
            Format::Text => out(&view::text(&view, 0)),
        }
        if t.once || !live {
            return VALID;
        }
        before = after;
    }
}

/// Keys that end the live view: q, and Ctrl-C and Ctrl-D, which arrive as
/// bytes while the terminal sends no signals.
fn quits(byte: u8) -> bool {
    matches!(byte, b'q' | b'Q' | 0x03 | 0x04)
}

/// A message each time a quitting key is read from stdin (by a thread of
/// its own: reading blocks). The channel closes when stdin does.
fn quit_keys() -> std::sync::mpsc::Receiver<()> {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut byte = [0u8; 1];
        while let Ok(1) = stdin.read(&mut byte) {
            let [b] = byte;
            if quits(b) && tx.send(()).is_err() {
                return;
            }
        }
    });
    rx
}

/// The terminal without line buffering, echo or signals while the view
/// runs, so a key arrives as it is pressed (Ctrl-C too: the view then ends
/// by returning, and the terminal is put back). Set and restored with
/// `stty` (two calls, no terminal crate); where there is no `stty`, the
/// terminal stays as it is and q counts after Enter.
struct RawTerminal {
    /// `stty -g`: the settings to restore.
    saved: Option<String>,
}

impl RawTerminal {
    fn enter() -> RawTerminal {
        let saved = stty(&["-g"]).filter(|s| !s.is_empty());
        let set = saved.is_some()
            && stty(&["-icanon", "-echo", "-isig", "min", "1", "time", "0"]).is_some();
        RawTerminal {
            saved: if set { saved } else { None },
        }
    }

    fn is_raw(&self) -> bool {
        self.saved.is_some()
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = stty(&[saved]);
        }
    }
}

/// `stty ARGS` on the terminal that is stdin; its output, or `None` when it
/// fails or is not there.
fn stty(args: &[&str]) -> Option<String> {
    use std::process::{Command, Stdio};
    let o = Command::new("stty")
        .args(args)
        .stdin(Stdio::inherit())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_ctrl_c_and_ctrl_d_quit_other_keys_do_not() {
        for b in [b'q', b'Q', 0x03, 0x04] {
            assert!(quits(b), "{b}");
        }
        for b in [b' ', b'\n', b'x', 0x1b] {
            assert!(!quits(b), "{b}");
        }
    }
}
