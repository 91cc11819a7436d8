//! The windows the rate-limit service keeps: an installation bound's
//! window is one of them, and a fleet bound's syncs count in them.

/// A window the service keeps. A bound's window is one of the first four
/// ([`UNITS`]); the longer ones only key a sliding bound's counts
/// ([`Unit::keeping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    /// 30 days, as the service counts it.
    Month,
    /// 365 days, as the service counts it.
    Year,
}

/// The windows a bound may have.
pub(crate) const UNITS: [Unit; 4] = [Unit::Second, Unit::Minute, Unit::Hour, Unit::Day];

/// Every unit the service keeps, shortest first.
const SPANS: [Unit; 7] = [
    Unit::Second,
    Unit::Minute,
    Unit::Hour,
    Unit::Day,
    Unit::Week,
    Unit::Month,
    Unit::Year,
];

impl Unit {
    pub fn ms(self) -> u64 {
        match self {
            Unit::Second => 1_000,
            Unit::Minute => 60_000,
            Unit::Hour => 3_600_000,
            Unit::Day => 86_400_000,
            Unit::Week => 7 * 86_400_000,
            Unit::Month => 30 * 86_400_000,
            Unit::Year => 365 * 86_400_000,
        }
    }

    /// As a bound's `window` is written.
    pub fn window(self) -> &'static str {
        match self {
            Unit::Second => "PT1S",
            Unit::Minute => "PT1M",
            Unit::Hour => "PT1H",
            Unit::Day => "P1D",
            Unit::Week => "P7D",
            Unit::Month => "P30D",
            Unit::Year => "P365D",
        }
    }

    /// As the service's configuration names it.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// The unit whose clock window keys the counts of window `win` of
    /// `self` (a sliding bound's): the service appends its own window's
    /// start to every key, so a count written in window `win` is read back
    /// in window `win + 1` only if one window of the keying unit spans
    /// both, with a margin for clocks that disagree (a window, at most a
    /// minute) on either side. The shortest such unit: its keys expire
    /// soonest. Each unit's windows start at multiples of its length from
    /// the epoch, so a week's, a 30-day month's and a 365-day year's edges
    /// rarely meet; where all of them fall in the span, the year is kept
    /// and that one window reads its predecessor as empty: for windows of
    /// a second, a minute or an hour next on 11 Dec 2053 (then every
    /// 15,330 days), for windows of a day next on 12 Dec 2041.
    pub fn keeping(self, win: u64) -> Unit {
        let w = self.ms();
        let margin = w.min(60_000);
        let first = win.saturating_mul(w).saturating_sub(margin);
        let last = win
            .saturating_add(2)
            .saturating_mul(w)
            .saturating_add(margin - 1);
        SPANS
            .into_iter()
            .filter(|u| u.ms() > w)
            .find(|u| first / u.ms() == last / u.ms())
            .unwrap_or(Unit::Year)
    }

    /// The unit of a window of `ms`, if the service keeps it.
    pub(crate) fn of_ms(ms: u64) -> Option<Unit> {
        UNITS.into_iter().find(|u| u.ms() == ms)
    }

    /// The kept window closest to `ms` (by ratio: 40 minutes is nearer an
    /// hour than a minute).
    pub fn nearest(ms: u64) -> Unit {
        let ratio = |u: Unit| {
            let (a, b) = (u.ms().max(ms) as f64, u.ms().min(ms).max(1) as f64);
            a / b
        };
        UNITS
            .into_iter()
            .min_by(|a, b| ratio(*a).total_cmp(&ratio(*b)))
            .unwrap_or(Unit::Minute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_unit_by_ratio() {
        assert_eq!(Unit::nearest(30_000), Unit::Minute);
        assert_eq!(Unit::nearest(5_000), Unit::Second);
        assert_eq!(Unit::nearest(40 * 60_000), Unit::Hour);
        assert_eq!(Unit::nearest(3 * 3_600_000), Unit::Hour);
        assert_eq!(Unit::nearest(6 * 3_600_000), Unit::Day);
        assert_eq!(Unit::nearest(12 * 3_600_000), Unit::Day);
        assert_eq!(Unit::of_ms(60_000), Some(Unit::Minute));
        assert_eq!(Unit::of_ms(120_000), None);
        assert_eq!(Unit::of_ms(Unit::Week.ms()), None, "not a bound's window");
    }

    /// A window's count and its successor's reads fall in one window of
    /// the keying unit, a margin included: for every window of two years
    /// of minutes, of seconds around a day's edge, and of days from 2027
    /// to 2035; the rare day that loses its predecessor keys by the year.
    #[test]
    fn a_sliding_count_is_read_back_under_the_unit_it_was_written_in() {
        let year_of_minutes = 2 * 365 * 24 * 60;
        let mut lost = 0;
        for (unit, wins) in [
            (Unit::Minute, 28_000_000..28_000_000 + year_of_minutes),
            (Unit::Second, 86_400 * 20_000 - 200..86_400 * 20_000 + 200),
            (Unit::Hour, 400_000..420_000),
            (Unit::Day, 20_820..23_740),
        ] {
            for win in wins {
                let k = unit.keeping(win);
                let w = unit.ms();
                let margin = w.min(60_000);
                let (from, to) = (win * w - margin, (win + 2) * w + margin - 1);
                if from / k.ms() != to / k.ms() {
                    lost += 1;
                    assert_eq!(k, Unit::Year);
                }
                assert!(k.ms() > w);
            }
        }
        assert_eq!(lost, 0, "no window in these years loses its predecessor");
        // 19 Dec 2023: a 30-day month's and a 365-day year's edge, and a week's
        // two days later, all fall in the span of day window 19,710.
        assert_eq!(Unit::Day.keeping(19_710), Unit::Year);
        assert_ne!(Unit::Day.keeping(19_713), Unit::Year);
        // Within an hour, minutes are keyed by the hour; the hour's last
        // two and first are keyed by the day.
        let hour0 = 28_000_020u64; // a minute index that starts an hour
        assert_eq!(hour0 % 60, 0);
        assert_eq!(Unit::Minute.keeping(hour0 + 5), Unit::Hour);
        assert_eq!(Unit::Minute.keeping(hour0 + 58), Unit::Day);
        assert_eq!(Unit::Minute.keeping(hour0), Unit::Day);
    }
}
