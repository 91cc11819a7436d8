//! How far the two-window estimate is from an exact sliding log: synthetic
//! traces replayed through [`Rate::decide`] with a fake clock. Used by the
//! property tests (which assert the targets) and by
//! `cargo run --release --example accuracy` (which prints the figures).

use ratebound::count::window::{Counts, Rate, Verdict};
use std::collections::VecDeque;

/// Deterministic generator for traces (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Exponential gap with the given mean.
    pub fn gap(&mut self, mean_ms: f64) -> u64 {
        (-(1.0 - self.unit()).ln() * mean_ms).round() as u64
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-12);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// Poisson arrivals in `[start, end)` with the given mean gap.
pub fn poisson(rng: &mut Rng, start: u64, end: u64, mean_ms: f64) -> Vec<u64> {
    let mut t = start;
    std::iter::from_fn(|| {
        t += rng.gap(mean_ms);
        (t < end).then_some(t)
    })
    .collect()
}

/// On/off traffic: bursts at 3× the limit for a third of a window, then
/// silence for half a window to a window and a half.
pub fn on_off(rng: &mut Rng, rate: Rate, start: u64, end: u64) -> Vec<u64> {
    let w = rate.window_ms;
    let mean = w as f64 / f64::from(rate.limit) / 3.0;
    let mut out = Vec::new();
    let mut t = start;
    while t < end {
        let burst_end = t + w / 3;
        while t < burst_end.min(end) {
            t += rng.gap(mean);
            out.push(t);
        }
        t += w / 2 + rng.next_u64() % w;
    }
    out
}

/// Errors of the estimate against an exact sliding log, per caller:
/// - wrongly admitted: the exact count of admitted requests in the trailing
///   window had already reached the limit;
/// - wrongly refused: the caller's offered requests in the trailing window
///   were under the limit (a compliant caller was refused).
#[derive(Debug, Default, Clone, Copy)]
pub struct Errors {
    pub requests: usize,
    pub wrongly_admitted: usize,
    pub wrongly_refused: usize,
}

impl Errors {
    /// Replays one caller's request times (sorted).
    pub fn replay(&mut self, rate: Rate, times: &[u64]) {
        let w = rate.window_ms;
        let mut c = Counts::default();
        let mut admitted: VecDeque<u64> = VecDeque::new();
        let mut offered: VecDeque<u64> = VecDeque::new();
        for &t in times {
            while admitted.front().is_some_and(|&x| x + w <= t) {
                admitted.pop_front();
            }
            while offered.front().is_some_and(|&x| x + w <= t) {
                offered.pop_front();
            }
            let compliant = (offered.len() as u32) < rate.limit;
            offered.push_back(t);
            self.requests += 1;
            match rate.decide(c, t) {
                Verdict::Admit { counts, .. } => {
                    c = counts;
                    if admitted.len() as u32 >= rate.limit {
                        self.wrongly_admitted += 1;
                    }
                    admitted.push_back(t);
                }
                Verdict::Refuse { .. } => self.wrongly_refused += usize::from(compliant),
            }
        }
    }

    pub fn wrong_share(&self) -> f64 {
        (self.wrongly_admitted + self.wrongly_refused) as f64 / self.requests.max(1) as f64
    }

    pub fn refused_share(&self) -> f64 {
        self.wrongly_refused as f64 / self.requests.max(1) as f64
    }
}

/// Callers whose rates are log-normal around `median` × limit: most far
/// below their limit, a tail above it (Cloudflare's "real traffic" shape).
pub fn population(
    seed: u64,
    rate: Rate,
    callers: usize,
    windows: u64,
    median: f64,
    sigma: f64,
) -> Errors {
    let mut rng = Rng(seed);
    let mut errors = Errors::default();
    for _ in 0..callers {
        let load = median * (sigma * rng.normal()).exp();
        let mean = rate.window_ms as f64 / (f64::from(rate.limit) * load);
        let start = 1_000 * rate.window_ms + rng.next_u64() % rate.window_ms;
        let times = poisson(&mut rng, start, start + windows * rate.window_ms, mean);
        errors.replay(rate, &times);
    }
    errors
}

/// The most requests admitted in any interval of length `span_ms`.
pub fn max_in_span(admitted: &[u64], span_ms: u64) -> usize {
    let mut best = 0;
    let mut lo = 0;
    for (hi, &t) in admitted.iter().enumerate() {
        while admitted.get(lo).is_some_and(|&a| a + span_ms <= t) {
            lo += 1;
        }
        best = best.max(hi + 1 - lo);
    }
    best
}

/// What the sliding estimate admits of `times` (sorted).
pub fn admitted_sliding(rate: Rate, times: &[u64]) -> Vec<u64> {
    let mut c = Counts::default();
    times
        .iter()
        .copied()
        .filter(|&t| match rate.decide(c, t) {
            Verdict::Admit { counts, .. } => {
                c = counts;
                true
            }
            Verdict::Refuse { .. } => false,
        })
        .collect()
}

/// What a fixed window (a counter reset at each boundary) admits.
pub fn admitted_fixed(rate: Rate, times: &[u64]) -> Vec<u64> {
    let (mut win, mut n) = (u64::MAX, 0u32);
    times
        .iter()
        .copied()
        .filter(|&t| {
            let w = t / rate.window_ms;
            if w != win {
                (win, n) = (w, 0);
            }
            (n < rate.limit).then(|| n += 1).is_some()
        })
        .collect()
}

/// An adversary who knows the window alignment: quiet for a window, then a
/// request every `step_ms` from just before a boundary on, for two windows.
pub fn boundary_attack(rate: Rate, step_ms: u64, lead_ms: u64) -> Vec<u64> {
    let boundary = 1_000 * rate.window_ms;
    let start = boundary - lead_ms;
    (0..)
        .map(|i| start + i * step_ms)
        .take_while(|t| *t < boundary + 2 * rate.window_ms)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_window_admits_twice_the_limit_in_a_moment_and_the_estimate_does_not() {
        let rate = Rate {
            limit: 100,
            window_ms: 60_000,
        };
        let attack = boundary_attack(rate, 1, 100);
        assert_eq!(max_in_span(&admitted_fixed(rate, &attack), 200), 200);
        assert!(max_in_span(&admitted_sliding(rate, &attack), 200) <= 101);
    }

    #[test]
    fn max_in_span_counts_a_sliding_interval() {
        assert_eq!(max_in_span(&[0, 1, 2, 10, 11], 3), 3);
        assert_eq!(max_in_span(&[0, 10, 20], 5), 1);
    }
}
