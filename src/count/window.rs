//! The two-window sliding estimate, as pure functions of (counts, now).
//!
//! `estimate = cur + prev × (1 − elapsed / window)`, windows aligned to the
//! clock. Integer arithmetic throughout: a request is admitted when
//! `(cur + 1)·w + prev·(w − e) ≤ limit·w`, which never rounds in the caller's
//! favour.
//!
//! A clock that steps back finds keys written in a window that has not
//! started yet. The rule, in [`Counts::at`] and [`Rate::decide`]:
//!
//! - **One window ahead** (another worker read the clock a microsecond
//!   later, or the clock stepped back by less than about a window): the
//!   key's time does not move back. It is decided as of the start of its
//!   window (elapsed 0: the previous count weighs in full), and Reset /
//!   Retry-After count from `now`, so they include the time until that
//!   start: waiting them on the clock as it now runs admits, and not a
//!   millisecond sooner.
//! - **Two or more windows ahead** (the clock stepped back by more than a
//!   window): those counts cannot be placed on this clock. They are dropped
//!   and the key starts empty, as after a restart — at most one fresh
//!   budget per caller per step, where keeping them would refuse every
//!   recently busy caller for as long as the step (an hour for an hour).
//!
//! So every decision keeps two invariants, whatever the clock did: a
//! refused caller that waits `reset_ms` is admitted (and is refused 1 ms
//! before), and `remaining` is exactly how many more are admitted at `now`.

/// The counts of one key: the window they were last written in, that
/// window's count and the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub win: u64,
    pub cur: u32,
    pub prev: u32,
}

impl Counts {
    /// The same counts seen from window `win`: slid once, or emptied when
    /// more than one window has passed. A key written in the next window
    /// (another worker's clock a microsecond ahead, a small step back) is
    /// kept as is; one written further ahead is emptied (see the module
    /// doc: the clock stepped back by more than a window).
    pub fn at(self, win: u64) -> Counts {
        if self.win == win || self.win == win.saturating_add(1) {
            self
        } else if self.win.saturating_add(1) == win {
            Counts {
                win,
                cur: 0,
                prev: self.cur,
            }
        } else {
            Counts {
                win,
                cur: 0,
                prev: 0,
            }
        }
    }

    /// True when the counts no longer weigh on any estimate at window `win`:
    /// the key can be reclaimed.
    pub(crate) fn expired(self, win: u64) -> bool {
        let c = self.at(win);
        c.cur == 0 && c.prev == 0
    }
}

/// A bound's arithmetic: `limit` requests per `window_ms`. The invariants
/// in the module doc hold for `limit ≥ 1` and `window_ms ≥ 1`, which the
/// configuration guarantees (a zero window would divide by zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    pub limit: u32,
    pub window_ms: u64,
}

/// What a bound says about one more request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Admit; `counts` is what to store, `quota` what to tell the client.
    Admit { counts: Counts, quota: Quota },
    /// Refuse; nothing is stored.
    Refuse { quota: Quota },
}

impl Verdict {
    pub fn admits(&self) -> bool {
        matches!(self, Verdict::Admit { .. })
    }
}

/// The figures a client is told (RateLimit-* headers), in milliseconds
/// before rounding so the header layer decides rounding once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub limit: u32,
    pub remaining: u32,
    /// Until the next request would be admitted when `remaining` is 0,
    /// otherwise until the current window ends and its count starts to slide out.
    pub reset_ms: u64,
}

impl Rate {
    pub fn window_of(&self, now_ms: u64) -> u64 {
        now_ms / self.window_ms
    }

    /// Weighted count (in units of 1/w requests) of `c` at `now`, `c`
    /// already slid to now's window.
    fn weighted(&self, c: Counts, now_ms: u64) -> u128 {
        let w = u128::from(self.window_ms);
        let elapsed = self.elapsed(c, now_ms);
        u128::from(c.cur) * w + u128::from(c.prev) * (w - elapsed)
    }

    /// Milliseconds into window `c.win` (0 when `c` is ahead of `now`).
    fn elapsed(&self, c: Counts, now_ms: u64) -> u128 {
        let start = c.win.saturating_mul(self.window_ms);
        u128::from(now_ms.saturating_sub(start).min(self.window_ms))
    }

    fn capacity(&self) -> u128 {
        u128::from(self.limit) * u128::from(self.window_ms)
    }

    /// Decides one more request against `stored` at `now`.
    pub fn decide(&self, stored: Counts, now_ms: u64) -> Verdict {
        self.decide_hits(stored, now_ms, 1)
    }

    /// Decides one more request that takes `hits` units (a cost bound's
    /// reservation, or a cost known up front): admitted when all of them
    /// fit under the limit, and charged all of them. `hits` 1 is
    /// [`Rate::decide`].
    pub fn decide_hits(&self, stored: Counts, now_ms: u64, hits: u32) -> Verdict {
        let c = stored.at(self.window_of(now_ms));
        let w = u128::from(self.window_ms);
        let weighted = self.weighted(c, now_ms);
        if weighted + u128::from(hits) * w <= self.capacity() {
            let counts = Counts {
                cur: c.cur.saturating_add(hits),
                ..c
            };
            let after = weighted + u128::from(hits) * w;
            let remaining = (self.capacity().saturating_sub(after) / w) as u32;
            let reset_ms = if remaining == 0 {
                self.wait_from(counts, now_ms, hits)
            } else {
                self.window_end_ms(counts, now_ms)
            };
            Verdict::Admit {
                counts,
                quota: Quota {
                    limit: self.limit,
                    remaining,
                    reset_ms,
                },
            }
        } else {
            Verdict::Refuse {
                quota: Quota {
                    limit: self.limit,
                    remaining: 0,
                    reset_ms: self.wait_from(c, now_ms, hits),
                },
            }
        }
    }

    /// Milliseconds from `now` until window `c.win` starts: 0 unless the
    /// key is ahead of the clock.
    fn ahead(&self, c: Counts, now_ms: u64) -> u64 {
        c.win.saturating_mul(self.window_ms).saturating_sub(now_ms)
    }

    /// Until window `c.win` ends, counted from `now`.
    fn window_end_ms(&self, c: Counts, now_ms: u64) -> u64 {
        let left = (u128::from(self.window_ms) - self.elapsed(c, now_ms)) as u64;
        left.saturating_add(self.ahead(c, now_ms))
    }

    /// Whole requests left under the limit for `c` (slid to now's window
    /// here): `floor(limit − estimate)`, 0 when at or over it.
    pub fn left(&self, c: Counts, now_ms: u64) -> u32 {
        let c = c.at(self.window_of(now_ms));
        let w = u128::from(self.window_ms.max(1));
        let left = self.capacity().saturating_sub(self.weighted(c, now_ms)) / w;
        u32::try_from(left).unwrap_or(u32::MAX)
    }

    /// The shortest wait after which one more request would be admitted,
    /// with `c` as the stored counts (slid to now's window here).
    pub fn wait_ms(&self, c: Counts, now_ms: u64) -> u64 {
        self.wait_from(c.at(self.window_of(now_ms)), now_ms, 1)
    }

    /// [`Rate::wait_ms`] for counts already slid to now's window: from the
    /// start of the key's window when it is ahead of the clock, plus the
    /// time until that start.
    fn wait_from(&self, c: Counts, now_ms: u64, hits: u32) -> u64 {
        self.wait_in_window(c, now_ms, hits)
            .saturating_add(self.ahead(c, now_ms))
    }

    /// The wait, counted from `max(now, start of c.win)`.
    fn wait_in_window(&self, c: Counts, now_ms: u64, hits: u32) -> u64 {
        let w = u128::from(self.window_ms);
        let e = self.elapsed(c, now_ms);
        let limit = u128::from(self.limit);
        let (cur, prev, h) = (u128::from(c.cur), u128::from(c.prev), u128::from(hits));
        // In this window: need prev·(w − e') ≤ (limit − cur − h)·w.
        if cur + h <= limit {
            let room = (limit - cur - h) * w;
            // No previous count: nothing to wait for in this window.
            let e_min = room.checked_div(prev).map_or(0, |r| w.saturating_sub(r));
            if e_min < w {
                return e_min.saturating_sub(e) as u64;
            }
        }
        // Next window: cur becomes prev; need h·w + cur·(w − e'') ≤ limit·w.
        let room = limit.saturating_sub(h) * w;
        let e_next = room.checked_div(cur).map_or(0, |r| w.saturating_sub(r));
        ((w - e) + e_next) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weighted_request_needs_one_unit_left_and_is_charged_all_of_its_hits() {
        let r = Rate {
            limit: 1_000,
            window_ms: 60_000,
        };
        let t0 = 60_000 * 100;
        let c = Counts {
            win: 100,
            cur: 999,
            prev: 0,
        };
        // One token left: a reservation of 300 does not fit; one does.
        assert!(!r.decide_hits(c, t0, 300).admits());
        let c = Counts { cur: 700, ..c };
        let Verdict::Admit { counts, quota } = r.decide_hits(c, t0, 300) else {
            panic!("300 fit in 300 left")
        };
        assert_eq!((counts.cur, quota.remaining), (1_000, 0));
        assert!(!r.decide_hits(counts, t0 + 1, 1).admits());
        // Unit hits are the plain decision.
        for cur in [0, 500, 999, 1_000] {
            let c = Counts { cur, ..c };
            assert_eq!(r.decide_hits(c, t0 + 7, 1), r.decide(c, t0 + 7));
        }
        // The over-charge slides out like any count: the next admission
        // comes once the estimate is under the limit again.
        let Verdict::Refuse { quota } = r.decide_hits(counts, t0 + 1, 300) else {
            panic!()
        };
        let at = t0 + 1 + quota.reset_ms;
        assert!(!r.decide_hits(counts, at - 1, 300).admits());
        assert!(r.decide_hits(counts, at, 300).admits());
    }

    const MIN: u64 = 60_000;

    fn rate(limit: u32, window_ms: u64) -> Rate {
        Rate { limit, window_ms }
    }

    /// Runs requests at the given instants, returns how many were admitted.
    fn admitted(r: &Rate, c: &mut Counts, times: impl IntoIterator<Item = u64>) -> u32 {
        let mut n = 0;
        for t in times {
            if let Verdict::Admit { counts, .. } = r.decide(*c, t) {
                *c = counts;
                n += 1;
            }
        }
        n
    }

    #[test]
    fn admits_exactly_limit_in_one_window() {
        let r = rate(5, MIN);
        let mut c = Counts::default();
        assert_eq!(admitted(&r, &mut c, (0..20).map(|i| 10 * MIN + i)), 5);
    }

    #[test]
    fn regression_fixed_window_fault_at_the_boundary() {
        // A burst of `limit` just before a boundary, then `limit` more just
        // after it: a resetting bucket admits 2 × limit here.
        let r = rate(100, MIN);
        let mut c = Counts::default();
        let boundary = 7 * MIN;
        assert_eq!(
            admitted(&r, &mut c, (0..100).map(|i| boundary - 100 + i)),
            100
        );
        assert_eq!(admitted(&r, &mut c, (0..100).map(|i| boundary + i)), 0);
    }

    #[test]
    fn quota_and_wait_when_refused() {
        let r = rate(2, 10_000);
        let mut c = Counts::default();
        let t0 = 100_000; // start of a window
        let Verdict::Admit { counts, quota } = r.decide(c, t0) else {
            panic!()
        };
        assert_eq!((quota.remaining, quota.reset_ms), (1, 10_000));
        c = counts;
        let Verdict::Admit { counts, quota } = r.decide(c, t0 + 1_000) else {
            panic!()
        };
        assert_eq!(quota.remaining, 0);
        // Both requests are in this window; the next one fits when this
        // window's count of 2 has slid to ≤ 1: halfway into the next window.
        assert_eq!(quota.reset_ms, 9_000 + 5_000);
        c = counts;
        let Verdict::Refuse { quota } = r.decide(c, t0 + 2_000) else {
            panic!()
        };
        assert_eq!(quota.reset_ms, 8_000 + 5_000);
        // And the wait is exact: refused 1 ms before, admitted at.
        let at = t0 + 2_000 + quota.reset_ms;
        assert!(matches!(r.decide(c, at - 1), Verdict::Refuse { .. }));
        assert!(matches!(r.decide(c, at), Verdict::Admit { .. }));
    }

    /// Refused while the previous window's count slides out, with room
    /// in this one: the wait ends inside this window, at the first
    /// millisecond the estimate fits, not at the window's end.
    #[test]
    fn a_refusal_waits_only_until_enough_of_the_previous_window_has_slid_out() {
        let r = rate(10, 1_000);
        let c = Counts {
            win: 5,
            cur: 4,
            prev: 8,
        };
        // 100 ms in: 4 + 8 × 0.9 = 11.2 requests; one more fits at 4 + 8 ×
        // (1 − e) ≤ 9, from e = 375 ms.
        let now = 5_100;
        let Verdict::Refuse { quota } = r.decide(c, now) else {
            panic!("11.2 of 10")
        };
        assert_eq!(quota.reset_ms, 275);
        assert_eq!(r.wait_ms(c, now), 275);
        assert!(!r.decide(c, 5_374).admits());
        let Verdict::Admit { quota, .. } = r.decide(c, 5_375) else {
            panic!("9 + 1 of 10")
        };
        assert_eq!(quota.remaining, 0);
    }

    #[test]
    fn limit_one_waits_for_the_previous_window_to_slide_out() {
        let r = rate(1, 1_000);
        let c = Counts {
            win: 5,
            cur: 1,
            prev: 0,
        };
        let Verdict::Refuse { quota } = r.decide(c, 5_400) else {
            panic!()
        };
        assert_eq!(quota.reset_ms, 600 + 1_000);
    }

    /// The clock stepped back (or another worker's clock read a hair
    /// ahead): the key's window starts after `now`. The wait counts from
    /// `now`, so waiting it on this clock admits, and not a millisecond less.
    #[test]
    fn a_window_ahead_of_the_clock_counts_the_time_until_it_starts() {
        let r = rate(2, 1_000);
        let c = Counts {
            win: 11,
            cur: 2,
            prev: 0,
        };
        let now = 10_500;
        let Verdict::Refuse { quota } = r.decide(c, now) else {
            panic!()
        };
        // 500 ms until window 11 starts, then all of it, then half of the
        // next until its count of 2 has slid to 1.
        assert_eq!(quota.reset_ms, 500 + 1_000 + 500);
        assert!(!r.decide(c, now + quota.reset_ms - 1).admits());
        assert!(r.decide(c, now + quota.reset_ms).admits());
        assert_eq!(r.wait_ms(c, now), quota.reset_ms);

        // Admitted with room left: Reset is the end of the key's window.
        let one = Counts { cur: 0, ..c };
        let Verdict::Admit { counts, quota } = r.decide(one, now) else {
            panic!()
        };
        assert_eq!(
            counts,
            Counts { cur: 1, ..c },
            "the key's time never moves back"
        );
        assert_eq!((quota.remaining, quota.reset_ms), (1, 500 + 1_000));
        // Admitted as the last one: the wait, counted from now.
        let Verdict::Admit { counts, quota } = r.decide(counts, now) else {
            panic!()
        };
        assert_eq!((quota.remaining, quota.reset_ms), (0, 2_000));
        assert!(r.decide(counts, now + 2_000).admits());
        assert!(!r.decide(counts, now + 1_999).admits());
    }

    /// Stepped back by more than a window: counts written on the clock as it
    /// ran before cannot be placed on this one. The key starts empty (as
    /// after a restart) rather than freezing its caller for the whole step.
    #[test]
    fn counts_from_more_than_a_window_ahead_are_dropped() {
        let r = rate(5, 1_000);
        let c = Counts {
            win: 3_600,
            cur: 5,
            prev: 5,
        };
        let now = 100_250;
        let Verdict::Admit { counts, quota } = r.decide(c, now) else {
            panic!("a clock stepped back an hour refuses for an hour")
        };
        assert_eq!(
            counts,
            Counts {
                win: 100,
                cur: 1,
                prev: 0
            }
        );
        assert_eq!((quota.remaining, quota.reset_ms), (4, 750));
        assert!(c.expired(100), "nothing to keep: the sweep may reclaim it");
        assert!(!c.expired(3_599), "one window ahead still weighs");
    }

    #[test]
    fn counts_slide_and_expire() {
        let c = Counts {
            win: 10,
            cur: 4,
            prev: 3,
        };
        assert_eq!(c.at(10), c);
        assert_eq!(
            c.at(11),
            Counts {
                win: 11,
                cur: 0,
                prev: 4
            }
        );
        assert_eq!(
            c.at(12),
            Counts {
                win: 12,
                cur: 0,
                prev: 0
            }
        );
        assert_eq!(c.at(9), c, "a key from a clock slightly ahead is kept");
        assert!(!c.expired(11));
        assert!(c.expired(12));
    }
}
