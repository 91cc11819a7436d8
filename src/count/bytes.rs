//! Little-endian fixed-width fields, as the values this filter keeps in
//! shared data and the host's maps are written. Reading never panics: a
//! slice too short for a field reads as `None`.

/// The `N` bytes at `at`, if there are that many.
fn array_at<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

pub(crate) fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    array_at(b, at).map(u32::from_le_bytes)
}

pub(crate) fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    array_at(b, at).map(u64::from_le_bytes)
}

pub(crate) fn read_f64(b: &[u8], at: usize) -> Option<f64> {
    array_at(b, at).map(f64::from_le_bytes)
}

// For values whose length the caller checked first: a short slice reads as
// 0, never a panic.
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    read_u32(b, at).unwrap_or(0)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    read_u64(b, at).unwrap_or(0)
}

/// Fields read one after another from the front of a value.
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader(b)
    }

    /// What is left to read.
    pub fn rest(&self) -> &'a [u8] {
        self.0
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take::<8>().map(u64::from_le_bytes)
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_little_endian_and_a_short_slice_reads_as_nothing() {
        let b = [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(read_u32(&b, 0), Some(1));
        assert_eq!(read_u64(&b, 4), Some(2));
        assert_eq!(read_u64(&b, 5), None);
        assert_eq!(read_f64(&2.5f64.to_le_bytes(), 0), Some(2.5));
        assert_eq!(read_u32(&b, usize::MAX), None);
        assert_eq!(u32_at(&b, 10), 0);
        assert_eq!(u64_at(&b, 4), 2);
        let mut r = Reader::new(&b);
        assert_eq!((r.u32(), r.u8()), (Some(1), Some(2)));
        assert_eq!(r.rest().len(), 7);
        assert_eq!(r.u64(), None, "7 bytes left");
        assert_eq!(r.rest().len(), 7, "a failed read takes nothing");
    }
}
