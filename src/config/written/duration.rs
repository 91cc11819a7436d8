//! A bound's `window`: an ISO-8601 duration of whole seconds from `PT1S` to
//! `P1D`, parsed strictly, with a JSON Schema pattern that accepts exactly
//! the same strings.
//!
//! Accepted: `P`, then days, then `T` and hours, minutes, seconds, each
//! part a whole number without a sign (leading zeros allowed), in that order,
//! at least one part, and a `T` only before a time part. So that one regular
//! expression can say the same as the parser, the first part is not zero
//! and every later part stays below its carry (hours below 24, minutes and
//! seconds below 60): `PT90S` and `PT1M30S` are windows, `PT1M90S` and
//! `PT0M30S` are not (the error gives the spelling to use). Weeks, months
//! and years are refused: a week is past the maximum, a month or a year has
//! no fixed length.
//!
//! Errors say what is wrong and the nearest window: `PT0.99999999S` is
//! refused with "the nearest window is \"PT1S\"".

use std::fmt;

const MAX_S: u64 = 86_400;

/// Why a string is no window; its `Display` is the message `check` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowError {
    pub given: String,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Not `P`, days, `T`, hours, minutes, seconds in that order.
    Syntax,
    /// Designators in lower case; `fixed` is the same in capitals, when it
    /// is a window.
    LowerCase {
        fixed: Option<String>,
    },
    YearsOrMonths,
    Weeks,
    /// A `T` with no hours, minutes or seconds after it.
    EmptyTime {
        nearest: String,
    },
    /// A part with a sign.
    Signed {
        nearest: String,
    },
    /// A part with a fraction; `exact` when the whole is `nearest`.
    Fraction {
        nearest: String,
        exact: bool,
    },
    /// Below one second or past one day.
    OutOfRange {
        nearest: String,
    },
    /// The first part is zero (`PT0M30S`).
    ZeroFirst {
        nearest: String,
    },
    /// A part after the first at or past its carry (`PT1M90S`).
    PastCarry {
        nearest: String,
    },
    /// Not ISO-8601 but the shorthand of other tools (`60s`, `1m`,
    /// `30 seconds`, `1h30m`): `fixed` is the same duration as a window,
    /// when it is one; else `nearest` is the window nearest to it.
    Shorthand {
        fixed: Option<String>,
        nearest: String,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.given;
        match &self.problem {
            Problem::Syntax => write!(
                f,
                "{s:?} is not an ISO-8601 duration in days, hours, minutes and seconds; write e.g. \"PT30S\", \"PT1M\", \"PT1H30M\" or \"P1D\""
            ),
            Problem::LowerCase { fixed: Some(w) } => {
                write!(f, "{s:?}: ISO-8601 designators are capitals; write {w:?}")
            }
            Problem::LowerCase { fixed: None } => write!(
                f,
                "{s:?}: ISO-8601 designators are capitals, e.g. \"PT1M\", \"P1D\""
            ),
            Problem::YearsOrMonths => write!(
                f,
                "{s:?} uses years or months, whose length varies; use days at most (\"P1D\")"
            ),
            Problem::Weeks => write!(
                f,
                "{s:?} counts weeks, past the one-day maximum; use \"P1D\" at most"
            ),
            Problem::EmptyTime { nearest } => write!(
                f,
                "{s:?} has a \"T\" with no hours, minutes or seconds after it; write {nearest:?}"
            ),
            Problem::Signed { nearest } => write!(
                f,
                "{s:?} has a signed part; every part is a whole number without a sign (the nearest window is {nearest:?})"
            ),
            Problem::Fraction {
                nearest,
                exact: true,
            } => write!(
                f,
                "{s:?} has a fraction; every part is a whole number: write {nearest:?}"
            ),
            Problem::Fraction { nearest, .. } => write!(
                f,
                "{s:?} is not a whole number of seconds (the RateLimit fields count in seconds); every part is a whole number (the nearest window is {nearest:?})"
            ),
            Problem::OutOfRange { nearest } => write!(
                f,
                "{s:?} is outside PT1S..P1D: below a second a sliding window measures jitter, past a day it is a quota that must survive restarts (the nearest window is {nearest:?})"
            ),
            Problem::ZeroFirst { nearest } => {
                write!(f, "{s:?} starts with a zero part; write {nearest:?}")
            }
            Problem::PastCarry { nearest } => write!(
                f,
                "{s:?}: after the first part, hours stay below 24 and minutes and seconds below 60; write {nearest:?}"
            ),
            Problem::Shorthand {
                fixed: Some(w), ..
            } => write!(f, "{s:?} is not an ISO-8601 duration; write {w:?}"),
            Problem::Shorthand { nearest, .. } => write!(
                f,
                "{s:?} is not an ISO-8601 duration, nor a whole number of seconds from PT1S to P1D (the nearest window is {nearest:?})"
            ),
        }
    }
}

/// One part as written: sign, digits, fraction digits, designator (in
/// capitals) and its place in the order `Y M W D`, `H M S`.
#[derive(Debug, Clone, Copy)]
struct Part<'a> {
    signed: bool,
    negative: bool,
    int: &'a str,
    frac: Option<&'a str>,
    designator: u8,
    time: bool,
}

impl Part<'_> {
    fn seconds_per_unit(&self) -> i128 {
        match (self.time, self.designator) {
            (false, b'D') => 86_400,
            (true, b'H') => 3_600,
            (true, b'M') => 60,
            _ => 1,
        }
    }

    /// The carry a part after the first stays below.
    fn carry(&self) -> u64 {
        match (self.time, self.designator) {
            (true, b'H') => 24,
            (true, _) => 60,
            _ => u64::MAX,
        }
    }

    /// The whole value, saturated far past the maximum.
    fn whole(&self) -> u64 {
        let digits = self.int.trim_start_matches('0');
        if digits.len() > 12 {
            return u64::MAX / 4;
        }
        digits.parse().unwrap_or(0)
    }

    /// Nanoseconds, with sign and fraction (12 digits at most are read):
    /// only for the nearest window of a refused string.
    fn nanos(&self) -> i128 {
        let unit = self.seconds_per_unit() * 1_000_000_000;
        let mut v = i128::from(self.whole()).saturating_mul(unit);
        if let Some(frac) = self.frac {
            let frac = frac.get(..12).unwrap_or(frac);
            let scale = 10i128.pow(frac.len() as u32);
            let num: i128 = frac.parse().unwrap_or(0);
            v = v.saturating_add(num.saturating_mul(unit) / scale);
        }
        if self.negative {
            -v
        } else {
            v
        }
    }
}

struct Lexed<'a> {
    parts: Vec<Part<'a>>,
    /// A `T` was written.
    t: bool,
    lower: bool,
}

/// Reads `P…` leniently (signs, fractions, lower case, every designator),
/// so errors can say what is wrong; `None` when it is not that shape at all.
fn lex(s: &str) -> Option<Lexed<'_>> {
    let b = s.as_bytes();
    let lower_p = match b.first()? {
        b'P' => false,
        b'p' => true,
        _ => return None,
    };
    let mut out = Lexed {
        parts: Vec::new(),
        t: false,
        lower: lower_p,
    };
    let mut i = 1;
    // Place of the last designator in its section's order.
    let mut last: Option<usize> = None;
    while i < b.len() {
        if matches!(b.get(i), Some(b'T' | b't')) {
            if out.t {
                return None;
            }
            out.t = true;
            out.lower |= b.get(i) == Some(&b't');
            last = None;
            i += 1;
            continue;
        }
        let sign = matches!(b.get(i), Some(b'+' | b'-'));
        let negative = b.get(i) == Some(&b'-');
        if sign {
            i += 1;
        }
        let int_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let int = s.get(int_start..i)?;
        let frac = if matches!(b.get(i), Some(b'.' | b',')) {
            i += 1;
            let f = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            Some(s.get(f..i)?)
        } else {
            None
        };
        if int.is_empty() && frac.is_none_or(str::is_empty) {
            return None;
        }
        let d = *b.get(i)?;
        i += 1;
        let order: &[u8] = if out.t { b"HMS" } else { b"YMWD" };
        let place = order.iter().position(|o| *o == d.to_ascii_uppercase())?;
        if last.is_some_and(|l| l >= place) {
            return None;
        }
        last = Some(place);
        out.lower |= d.is_ascii_lowercase();
        out.parts.push(Part {
            signed: sign,
            negative,
            int,
            frac,
            designator: d.to_ascii_uppercase(),
            time: out.t,
        });
    }
    (!out.parts.is_empty()).then_some(out)
}

/// The spelling of `seconds` (1..=86,400) in the largest units: `P1D`,
/// `PT2M30S`.
fn canonical(seconds: u64) -> String {
    if seconds >= MAX_S {
        return "P1D".to_string();
    }
    let (h, m, s) = (seconds / 3_600, seconds % 3_600 / 60, seconds % 60);
    let mut out = "PT".to_string();
    for (n, d) in [(h, 'H'), (m, 'M'), (s, 'S')] {
        if n > 0 {
            out.push_str(&n.to_string());
            out.push(d);
        }
    }
    out
}

/// The window nearest to `nanos`, rounded to a second, within PT1S..P1D.
fn nearest(nanos: i128) -> String {
    let seconds = (nanos.saturating_add(500_000_000) / 1_000_000_000).clamp(1, MAX_S as i128);
    canonical(seconds as u64)
}

/// Nanoseconds in one of a shorthand's units (`s`, `min`, `hours`, ...);
/// a lone `M` is refused: minutes to some tools, months to others.
fn unit_nanos(unit: &str) -> Option<i128> {
    if unit == "M" {
        return None;
    }
    let second = 1_000_000_000;
    Some(match unit.to_ascii_lowercase().as_str() {
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => second / 1_000,
        "s" | "sec" | "secs" | "second" | "seconds" => second,
        "m" | "min" | "mins" | "minute" | "minutes" => 60 * second,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600 * second,
        "d" | "day" | "days" => 86_400 * second,
        "w" | "wk" | "week" | "weeks" => 604_800 * second,
        _ => return None,
    })
}

/// The duration of a shorthand (`60s`, `1m`, `30 seconds`, `1h30m`,
/// `1.5 min`) in nanoseconds: numbers, each followed by a unit, blanks
/// allowed between; `None` when it is not one.
fn shorthand_nanos(s: &str) -> Option<i128> {
    let b = s.trim().as_bytes();
    let mut i = 0;
    let mut total: i128 = 0;
    let mut parts = 0;
    while i < b.len() {
        let start = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
            i += 1;
        }
        let number = std::str::from_utf8(b.get(start..i)?).ok()?;
        while b.get(i) == Some(&b' ') {
            i += 1;
        }
        let unit_start = i;
        while b.get(i).is_some_and(u8::is_ascii_alphabetic) {
            i += 1;
        }
        let unit = std::str::from_utf8(b.get(unit_start..i)?).ok()?;
        while matches!(b.get(i), Some(b' ' | b',')) {
            i += 1;
        }
        let per = unit_nanos(unit)?;
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if int.is_empty() && frac.is_empty() || int.len() > 12 || frac.contains('.') {
            return None;
        }
        let frac = frac.get(..9).unwrap_or(frac);
        let whole: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let part: i128 = if frac.is_empty() {
            0
        } else {
            frac.parse().ok()?
        };
        let scale = 10i128.pow(frac.len() as u32);
        total = total
            .saturating_add(whole.saturating_mul(per))
            .saturating_add(part.saturating_mul(per) / scale);
        parts += 1;
    }
    (parts > 0).then_some(total)
}

/// The window a shorthand means, or the nearest one.
fn shorthand(s: &str) -> Option<Problem> {
    let nanos = shorthand_nanos(s)?;
    let exact = nanos % 1_000_000_000 == 0 && (1_000_000_000..=86_400_000_000_000).contains(&nanos);
    Some(Problem::Shorthand {
        fixed: exact.then(|| nearest(nanos)),
        nearest: nearest(nanos),
    })
}

/// Milliseconds of a window (see the module's documentation).
pub fn window_ms(s: &str) -> Result<u64, WindowError> {
    let fail = |problem| {
        Err(WindowError {
            given: s.to_string(),
            problem,
        })
    };
    let Some(lexed) = lex(s) else {
        return fail(shorthand(s).unwrap_or(Problem::Syntax));
    };
    if lexed.lower {
        let upper = s.to_ascii_uppercase();
        let fixed = window_ms(&upper).is_ok().then_some(upper);
        return fail(Problem::LowerCase { fixed });
    }
    let parts = &lexed.parts;
    let date = parts.iter().filter(|p| !p.time);
    if date.clone().any(|p| matches!(p.designator, b'Y' | b'M')) {
        return fail(Problem::YearsOrMonths);
    }
    if date.clone().any(|p| p.designator == b'W') {
        return fail(Problem::Weeks);
    }
    let nanos = parts
        .iter()
        .fold(0i128, |sum, p| sum.saturating_add(p.nanos()));
    if lexed.t && !parts.iter().any(|p| p.time) {
        return fail(Problem::EmptyTime {
            nearest: nearest(nanos),
        });
    }
    if parts.iter().any(|p| p.signed) {
        return fail(Problem::Signed {
            nearest: nearest(nanos),
        });
    }
    if parts.iter().any(|p| p.frac.is_some()) {
        let exact =
            nanos % 1_000_000_000 == 0 && (1_000_000_000..=86_400_000_000_000).contains(&nanos);
        return fail(Problem::Fraction {
            nearest: nearest(nanos),
            exact,
        });
    }
    let seconds = parts.iter().fold(0u64, |sum, p| {
        sum.saturating_add(p.whole().saturating_mul(p.seconds_per_unit() as u64))
    });
    if !(1..=MAX_S).contains(&seconds) {
        return fail(Problem::OutOfRange {
            nearest: canonical(seconds.clamp(1, MAX_S)),
        });
    }
    let (first, later) = parts
        .split_first()
        .map_or((None, &[][..]), |(f, l)| (Some(f), l));
    if first.is_some_and(|f| f.whole() == 0) {
        return fail(Problem::ZeroFirst {
            nearest: canonical(seconds),
        });
    }
    if later.iter().any(|p| p.whole() >= p.carry()) {
        return fail(Problem::PastCarry {
            nearest: canonical(seconds),
        });
    }
    Ok(seconds * 1_000)
}

/// The JSON Schema pattern of a window: exactly the strings [`window_ms`]
/// accepts (a test runs both over the same strings).
#[cfg(feature = "schema")]
pub fn pattern() -> String {
    // Numbers, leading zeros allowed: zero; a later part below its carry
    // (only minutes and seconds follow a first part that is not a day:
    // after a day, every part is zero); a first part from 1 to below its
    // maximum, then the maximum with zeros after it.
    let zero = "0+";
    let below_60 = "0*[1-5]?[0-9]";
    let hours = "0*(?:[1-9]|1[0-9]|2[0-3])";
    let minutes = "0*(?:[1-9][0-9]{0,2}|1[0-3][0-9]{2}|14[0-3][0-9])";
    let seconds = "0*(?:[1-9][0-9]{0,3}|[1-7][0-9]{4}|8[0-5][0-9]{3}|86[0-3][0-9]{2})";
    format!(
        "^P(?:0*1D(?:T(?:{zero}H(?:{zero}M)?(?:{zero}S)?|{zero}M(?:{zero}S)?|{zero}S))?\
         |T(?:{hours}H(?:{below_60}M)?(?:{below_60}S)?\
         |0*24H(?:{zero}M)?(?:{zero}S)?\
         |{minutes}M(?:{below_60}S)?\
         |0*1440M(?:{zero}S)?\
         |{seconds}S\
         |0*86400S))$"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(s: &str) -> Option<Problem> {
        window_ms(s).err().map(|e| e.problem)
    }

    #[test]
    fn windows_are_whole_seconds_from_one_second_to_one_day() {
        assert_eq!(window_ms("PT1S"), Ok(1_000));
        assert_eq!(window_ms("PT1M30S"), Ok(90_000));
        assert_eq!(window_ms("PT90S"), Ok(90_000));
        assert_eq!(window_ms("PT24H"), Ok(86_400_000));
        assert_eq!(window_ms("P1DT0S"), Ok(86_400_000));
        assert_eq!(window_ms("PT0005M"), Ok(300_000));
    }

    #[test]
    fn every_refusal_says_why_and_the_nearest_window() {
        let n = |s: &str| s.to_string();
        let cases = [
            ("PT-1M61S", Problem::Signed { nearest: n("PT1S") }),
            ("P1DT-23H", Problem::Signed { nearest: n("PT1H") }),
            ("PT+5S", Problem::Signed { nearest: n("PT5S") }),
            (
                "PT0.99999999S",
                Problem::Fraction {
                    nearest: n("PT1S"),
                    exact: false,
                },
            ),
            (
                "PT59.99999999M",
                Problem::Fraction {
                    nearest: n("PT1H"),
                    exact: false,
                },
            ),
            (
                "PT86400.0001S",
                Problem::Fraction {
                    nearest: n("P1D"),
                    exact: false,
                },
            ),
            (
                "P0.5D",
                Problem::Fraction {
                    nearest: n("PT12H"),
                    exact: true,
                },
            ),
            (
                "PT1,5M",
                Problem::Fraction {
                    nearest: n("PT1M30S"),
                    exact: true,
                },
            ),
            ("P1DT", Problem::EmptyTime { nearest: n("P1D") }),
            ("PT0S", Problem::OutOfRange { nearest: n("PT1S") }),
            ("P2D", Problem::OutOfRange { nearest: n("P1D") }),
            ("PT24H1S", Problem::OutOfRange { nearest: n("P1D") }),
            (
                "PT99999999999999999999S",
                Problem::OutOfRange { nearest: n("P1D") },
            ),
            (
                "PT0M30S",
                Problem::ZeroFirst {
                    nearest: n("PT30S"),
                },
            ),
            ("P0DT1H", Problem::ZeroFirst { nearest: n("PT1H") }),
            (
                "PT1M90S",
                Problem::PastCarry {
                    nearest: n("PT2M30S"),
                },
            ),
            ("PT1H60M", Problem::PastCarry { nearest: n("PT2H") }),
            ("PT23H60M", Problem::PastCarry { nearest: n("P1D") }),
            ("P1W", Problem::Weeks),
            ("P0YT1S", Problem::YearsOrMonths),
            ("P1M", Problem::YearsOrMonths),
            (
                "pt1m",
                Problem::LowerCase {
                    fixed: Some(n("PT1M")),
                },
            ),
            ("pt0s", Problem::LowerCase { fixed: None }),
            ("PeW", Problem::Syntax),
            ("P-1D", Problem::Signed { nearest: n("PT1S") }),
            ("PT1e1S", Problem::Syntax),
            ("PT1S1M", Problem::Syntax),
            ("PT", Problem::Syntax),
            ("P", Problem::Syntax),
            ("", Problem::Syntax),
            ("PT.S", Problem::Syntax),
        ];
        for (s, want) in cases {
            assert_eq!(problem(s), Some(want), "{s}");
        }
        let e = window_ms("PT0.99999999S").unwrap_err().to_string();
        assert!(
            e.starts_with("\"PT0.99999999S\" is not a whole number of seconds")
                && e.ends_with("(the nearest window is \"PT1S\")"),
            "{e}"
        );
        let e = window_ms("P2D").unwrap_err().to_string();
        assert!(e.starts_with("\"P2D\" is outside PT1S..P1D"), "{e}");
    }

    #[test]
    fn other_tools_shorthands_are_answered_with_the_window_to_write() {
        for (s, w) in [
            ("60s", "PT1M"),
            ("1m", "PT1M"),
            ("1h", "PT1H"),
            ("30 seconds", "PT30S"),
            ("1d", "P1D"),
            ("1h30m", "PT1H30M"),
            ("1.5 min", "PT1M30S"),
            ("90 S", "PT1M30S"),
            ("2 hours, 5 minutes", "PT2H5M"),
        ] {
            let e = window_ms(s).unwrap_err();
            assert_eq!(
                e.problem,
                Problem::Shorthand {
                    fixed: Some(w.to_string()),
                    nearest: w.to_string()
                },
                "{s}"
            );
            assert_eq!(
                e.to_string(),
                format!("{s:?} is not an ISO-8601 duration; write {w:?}")
            );
        }
        // Outside a window, or not whole seconds: the nearest one.
        for (s, nearest) in [
            ("2d", "P1D"),
            ("500ms", "PT1S"),
            ("1.5s", "PT2S"),
            ("1w", "P1D"),
        ] {
            let e = window_ms(s).unwrap_err();
            assert_eq!(
                e.problem,
                Problem::Shorthand {
                    fixed: None,
                    nearest: nearest.to_string()
                },
                "{s}"
            );
            assert!(
                e.to_string()
                    .ends_with(&format!("(the nearest window is {nearest:?})")),
                "{e}"
            );
        }
        // Months are not minutes; words that are no unit are no shorthand.
        for s in ["1M", "5 parsecs", "s", "1..5s", "60", "1m x"] {
            assert_eq!(problem(s), Some(Problem::Syntax), "{s}");
        }
    }

    #[test]
    fn the_nearest_window_is_spelled_in_the_largest_units() {
        assert_eq!(canonical(1), "PT1S");
        assert_eq!(canonical(60), "PT1M");
        assert_eq!(canonical(3_661), "PT1H1M1S");
        assert_eq!(canonical(86_399), "PT23H59M59S");
        assert_eq!(canonical(86_400), "P1D");
        for s in [1, 59, 61, 3_600, 3_601, 86_399, 86_400] {
            assert_eq!(window_ms(&canonical(s)), Ok(s * 1_000), "{s}");
        }
    }
}
