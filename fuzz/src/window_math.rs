//! Drives `Rate::decide` the way the filter does (the counts of an admitted
//! request are stored, a refusal stores nothing) over a fuzzed rate and a
//! fuzzed sequence of requests and clock moves, and checks after every
//! decision what a client is promised:
//!
//! - at most `limit` admitted per fixed window, and the two-window estimate
//!   after an admission is at most `limit`;
//! - (monotone clock) over any span of `d < window` ms, `n` admitted
//!   requests satisfy `n·w ≤ limit·(w + d)`: never more than `limit` in a
//!   moment, never more than `2·limit` in a window. It follows from the
//!   admission rule `(cur + 1)·w + prev·(w − e) ≤ limit·w`;
//! - (monotone clock) the stored counts are exactly the admitted requests
//!   of the current and of the previous fixed window;
//! - `remaining` is exact: that many more requests at the same instant are
//!   admitted, and the one after them is refused;
//! - a refusal (or an admission that leaves nothing) tells a wait of at
//!   most two windows (monotone clock), and a caller coming back after
//!   `Retry-After` (the wait rounded up to whole seconds, as the header
//!   layer does) on a monotonic clock is admitted, and the wait in ms is
//!   the shortest: after it admitted, one ms earlier refused;
//! - (monotone clock) with requests left, the reset is the end of the
//!   current fixed window.
//!
//! With `skew`, the clock sometimes steps back (NTP, or another worker a
//! little behind the one that wrote the counts): only the checks that do
//! not need a monotonic history apply (the stored counts may be ahead of
//! the clock): all but the sliding spans, the counts against the history,
//! the two-window cap on the wait and the reset at the window's end.

use arbitrary::Arbitrary;
use ratebound::reply::seconds_up;
use ratebound::count::window::{Counts, Rate, Verdict};
use std::collections::{BTreeMap, VecDeque};

/// Requests per input, at most (the sliding check is quadratic).
const MAX_REQUESTS: usize = 512;
/// How far an admission's `remaining` is followed, at most.
const MAX_REMAINING_FOLLOWED: u32 = 64;
/// Start instants stay below this (about 550 years), so that sums of
/// instants and waits never overflow in the harness.
const START_SPAN_MS: u64 = 1 << 44;

#[derive(Debug, Arbitrary)]
pub struct Input {
    limit: u32,
    /// Most inputs use a limit of at most 200 (bursts reach it); these any.
    any_limit: bool,
    window_s: u32,
    start_ms: u64,
    steps: Vec<Step>,
}

#[derive(Debug, Arbitrary)]
enum Step {
    /// 1 to 16 requests at the same instant.
    Burst(u8),
    /// Time passes: `frac`/1024 of a window (up to 64 windows).
    Wait(u16),
    /// Time passes by `ms` milliseconds.
    Tick(u16),
    /// The clock steps back by `frac`/4096 of a window (up to 16 windows);
    /// ignored on a monotone clock.
    Back(u16),
    /// The clock steps back by `ms` milliseconds; ignored on a monotone clock.
    BackMs(u16),
}

/// Runs `input`; panics (with what was promised and what happened) when a
/// check fails.
pub fn run(input: &Input, skew: bool) {
    let limit = if input.any_limit {
        input.limit.max(1)
    } else {
        1 + input.limit % 200
    };
    let rate = Rate {
        limit,
        window_ms: 1_000 * (1 + u64::from(input.window_s % 86_400)),
    };
    let mut sim = Sim {
        rate,
        skew,
        now: input.start_ms % START_SPAN_MS,
        stored: Counts::default(),
        requests: 0,
        recent: VecDeque::new(),
        per_window: BTreeMap::new(),
    };
    let w = rate.window_ms;
    for step in &input.steps {
        if sim.requests >= MAX_REQUESTS {
            break;
        }
        match *step {
            Step::Burst(n) => {
                for _ in 0..=(n % 16) {
                    sim.request();
                }
            }
            Step::Wait(frac) => sim.now += w * u64::from(frac) / 1024,
            Step::Tick(ms) => sim.now += u64::from(ms),
            Step::Back(frac) if skew => {
                sim.now = sim.now.saturating_sub(w * u64::from(frac) / 4096);
            }
            Step::BackMs(ms) if skew => sim.now = sim.now.saturating_sub(u64::from(ms)),
            Step::Back(_) | Step::BackMs(_) => {}
        }
    }
}

struct Sim {
    rate: Rate,
    skew: bool,
    now: u64,
    /// What the filter would have in shared data for this caller.
    stored: Counts,
    requests: usize,
    /// Monotone clock: the instants of the admissions of the last window.
    recent: VecDeque<u64>,
    /// Monotone clock: admissions per fixed window (the last two kept).
    per_window: BTreeMap<u64, u32>,
}

impl Sim {
    fn request(&mut self) {
        if self.requests >= MAX_REQUESTS {
            return;
        }
        self.requests += 1;
        let (rate, now) = (self.rate, self.now);
        match rate.decide(self.stored, now) {
            Verdict::Admit { counts, quota } => {
                self.stored = counts;
                assert_eq!(quota.limit, rate.limit, "the limit told is the bound's");
                assert!(
                    counts.cur <= rate.limit,
                    "{} admitted in one fixed window, limit {}: {counts:?} at {now}",
                    counts.cur,
                    rate.limit
                );
                assert!(
                    estimate_fits(rate, counts, now),
                    "estimate over the limit after an admission: {rate:?} {counts:?} at {now}"
                );
                assert!(
                    quota.remaining < rate.limit,
                    "remaining {} after an admission, limit {}",
                    quota.remaining,
                    rate.limit
                );
                self.follow_remaining(counts, quota.remaining);
                if quota.remaining == 0 {
                    self.check_wait(counts, quota.reset_ms, "admitted, 0 remaining");
                } else if !self.skew {
                    assert!(
                        (1..=rate.window_ms).contains(&quota.reset_ms)
                            && (now + quota.reset_ms) % rate.window_ms == 0,
                        "with {} remaining the reset {} ms is not the end of the window ({rate:?}, at {now})",
                        quota.remaining,
                        quota.reset_ms
                    );
                }
                if !self.skew {
                    self.record(counts);
                }
            }
            Verdict::Refuse { quota } => {
                assert_eq!(quota.limit, rate.limit, "the limit told is the bound's");
                assert_eq!(quota.remaining, 0, "a refusal tells 0 remaining");
                self.check_wait(self.stored, quota.reset_ms, "refused");
            }
        }
    }

    /// `remaining` more requests at this instant are admitted, the next is not.
    fn follow_remaining(&self, mut c: Counts, remaining: u32) {
        let followed = remaining.min(MAX_REMAINING_FOLLOWED);
        for i in 0..followed {
            match self.rate.decide(c, self.now) {
                Verdict::Admit { counts, .. } => c = counts,
                Verdict::Refuse { .. } => panic!(
                    "told {remaining} remaining, refused after {i} ({:?}, {:?} at {})",
                    self.rate, c, self.now
                ),
            }
        }
        if followed == remaining {
            assert!(
                !self.rate.decide(c, self.now).admits(),
                "told {remaining} remaining, admitted one more ({:?}, {c:?} at {})",
                self.rate,
                self.now
            );
        }
    }

    /// `c` (stored) is refused one more request now; `wait_ms` is what the
    /// client is told.
    fn check_wait(&self, c: Counts, wait_ms: u64, what: &str) {
        let (rate, now) = (self.rate, self.now);
        assert!(
            wait_ms > 0,
            "{what}: a wait of 0 while nothing more is admitted now ({rate:?}, {c:?} at {now})"
        );
        // Counts written in a window ahead of a clock that stepped back
        // may honestly take longer to slide out.
        assert!(
            self.skew || wait_ms <= 2 * rate.window_ms,
            "{what}: a wait of {wait_ms} ms, more than two windows ({rate:?}, {c:?} at {now})"
        );
        let retry_after_s = seconds_up(wait_ms);
        let back = now + retry_after_s * 1_000;
        assert!(
            rate.decide(c, back).admits(),
            "{what}: Retry-After {retry_after_s} s (wait {wait_ms} ms) lies: refused again at {back} ({rate:?}, {c:?} at {now})"
        );
        // The wait in ms is exact, whatever the clock did before (the
        // module promises it; it is what makes Retry-After honest).
        assert!(
            rate.decide(c, now + wait_ms).admits(),
            "{what}: refused again after the wait of {wait_ms} ms ({rate:?}, {c:?} at {now})"
        );
        assert!(
            !rate.decide(c, now + wait_ms - 1).admits(),
            "{what}: the wait of {wait_ms} ms is not the shortest ({rate:?}, {c:?} at {now})"
        );
    }

    /// Monotone clock: checks the stored counts against the history and the
    /// admissions of every span shorter than a window.
    fn record(&mut self, c: Counts) {
        let (w, now) = (self.rate.window_ms, self.now);
        let win = now / w;
        *self.per_window.entry(win).or_default() += 1;
        self.per_window.retain(|&k, _| k + 1 >= win);
        let count = |k: Option<u64>| {
            k.and_then(|k| self.per_window.get(&k))
                .copied()
                .unwrap_or(0)
        };
        let want = Counts {
            win,
            cur: count(Some(win)),
            prev: count(win.checked_sub(1)),
        };
        assert_eq!(
            c, want,
            "stored counts are not the admitted requests (at {now}, {:?})",
            self.rate
        );

        while self.recent.front().is_some_and(|&t| t + w <= now) {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        let limit = u128::from(self.rate.limit);
        let n_all = self.recent.len();
        for (i, &t) in self.recent.iter().enumerate() {
            let n = (n_all - i) as u128;
            let d = u128::from(now - t);
            assert!(
                n * u128::from(w) <= limit * (u128::from(w) + d),
                "{n} admitted within {d} ms ({t}..={now}), over limit·(1 + d/w) for {:?}",
                self.rate
            );
        }
    }
}

/// `cur + prev × (1 − elapsed/window) ≤ limit`, in whole numbers, with
/// `c` as stored (a window ahead of `now` counts as not yet elapsed).
fn estimate_fits(rate: Rate, c: Counts, now: u64) -> bool {
    let w = u128::from(rate.window_ms);
    let start = u128::from(c.win) * w;
    let e = u128::from(now).saturating_sub(start).min(w);
    let weighted = u128::from(c.cur) * w + u128::from(c.prev) * (w - e);
    weighted <= u128::from(rate.limit) * w
}
