//! The windows the rate-limit service keeps: an installation bound's
//! window is one of them, and a fleet bound's syncs count in them.

/// A window the service keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
}

pub(crate) const UNITS: [Unit; 4] = [Unit::Second, Unit::Minute, Unit::Hour, Unit::Day];

impl Unit {
    pub fn ms(self) -> u64 {
        match self {
            Unit::Second => 1_000,
            Unit::Minute => 60_000,
            Unit::Hour => 3_600_000,
            Unit::Day => 86_400_000,
        }
    }

    /// As a bound's `window` is written.
    pub fn window(self) -> &'static str {
        match self {
            Unit::Second => "PT1S",
            Unit::Minute => "PT1M",
            Unit::Hour => "PT1H",
            Unit::Day => "P1D",
        }
    }

    /// As the service's configuration names it.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
        }
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
    }
}
