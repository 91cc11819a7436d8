//! A value for every bound of a plan, in one dense table keyed by the
//! bound's place: its route and its position in the route. What a
//! configuration keeps per bound (a lane, stat slots, a refusal's place)
//! lives in one of these rather than in tables of tables of its own.

use crate::config::plan::{Bound, BoundId, Plan, Route, RouteId};

/// A `T` for each bound of a plan, route by route in plan order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundTable<T> {
    /// Where each route's bounds start in `values`, then their end: route
    /// `r`'s are `starts[r]..starts[r + 1]`.
    starts: Vec<usize>,
    values: Vec<T>,
}

impl<T> BoundTable<T> {
    /// A value for each bound of `plan`, made in plan order (route by
    /// route); the first error stops it.
    pub fn build<E>(
        plan: &Plan,
        mut value: impl FnMut(&Route, &Bound) -> Result<T, E>,
    ) -> Result<BoundTable<T>, E> {
        let mut starts = Vec::with_capacity(plan.routes.len() + 1);
        let mut values = Vec::with_capacity(plan.routes.iter().map(|r| r.bounds.len()).sum());
        for route in &plan.routes {
            starts.push(values.len());
            for bound in &route.bounds {
                values.push(value(route, bound)?);
            }
        }
        starts.push(values.len());
        Ok(BoundTable { starts, values })
    }

    /// A value for each bound of `plan` that cannot fail to be made.
    pub fn of(plan: &Plan, mut value: impl FnMut(&Route, &Bound) -> T) -> BoundTable<T> {
        let built: Result<_, std::convert::Infallible> =
            BoundTable::build(plan, |route, bound| Ok(value(route, bound)));
        match built {
            Ok(table) => table,
            Err(never) => match never {},
        }
    }

    /// The place of bound `b` of route `r`: a number no other bound of the
    /// plan has, below [`BoundTable::len`].
    pub fn place(&self, r: RouteId, b: BoundId) -> Option<usize> {
        let start = *self.starts.get(r.index())?;
        let end = *self.starts.get(r.index() + 1)?;
        let at = start.checked_add(b.index())?;
        (at < end).then_some(at)
    }

    /// The value of bound `b` of route `r`.
    pub fn get(&self, r: RouteId, b: BoundId) -> Option<&T> {
        self.values.get(self.place(r, b)?)
    }

    /// The values of route `r`'s bounds, in its order.
    pub fn route(&self, r: RouteId) -> Option<&[T]> {
        let start = *self.starts.get(r.index())?;
        let end = *self.starts.get(r.index() + 1)?;
        self.values.get(start..end)
    }

    /// Every bound's value with its place, in plan order.
    pub fn iter(&self) -> impl Iterator<Item = (RouteId, BoundId, &T)> {
        self.starts.windows(2).enumerate().flat_map(move |(r, w)| {
            let (start, end) = match *w {
                [start, end] => (start, end),
                _ => (0, 0),
            };
            self.values
                .get(start..end)
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(move |(b, v)| (RouteId(r), BoundId(b), v))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    #[test]
    fn each_bound_has_its_own_place_route_by_route() {
        let json = r#"{"routes":[
            {"name":"a","match":{"path_prefix":"/a"},"bounds":[
              {"per":"address","limit":1,"window":"PT1M"},
              {"per":"route","limit":9,"window":"PT1M"}]},
            {"name":"b","match":{"path_prefix":"/b"},"bounds":[
              {"per":"address","limit":2,"window":"PT1M"}]}]}"#;
        let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
        let t = BoundTable::of(&plan, |_, b| b.rate.limit);
        assert_eq!(t.iter().count(), 3);
        assert_eq!(t.get(RouteId(0), BoundId(1)), Some(&9));
        assert_eq!(t.get(RouteId(1), BoundId(0)), Some(&2));
        assert_eq!(t.get(RouteId(0), BoundId(2)), None);
        assert_eq!(t.get(RouteId(2), BoundId(0)), None);
        assert_eq!(t.route(RouteId(0)), Some(&[1, 9][..]));
        let places: Vec<_> = t.iter().filter_map(|(r, b, _)| t.place(r, b)).collect();
        assert_eq!(places, [0, 1, 2]);
        assert_eq!(t.place(RouteId(1), BoundId(0)), Some(2));
    }
}
