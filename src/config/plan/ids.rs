//! Handles a request holds across its callbacks instead of a borrow of the
//! plan: a route, a bound of it, an operation of it.

/// across its callbacks instead of a borrow of the plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteId(pub usize);

/// A bound, by its position in its route's `bounds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BoundId(pub usize);

/// An operation, by its position in its route's `operations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub usize);

impl RouteId {
    pub fn index(self) -> usize {
        self.0
    }
}

impl BoundId {
    pub fn index(self) -> usize {
        self.0
    }
}

impl OpId {
    pub fn index(self) -> usize {
        self.0
    }
}
