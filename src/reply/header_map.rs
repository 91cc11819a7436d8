//! The proxy-wasm header map encoding, both ways: local replies' headers
//! are written in it, and a request's headers come back in it.

use crate::count::bytes::read_u32;

/// The proxy-wasm map encoding: the count, each key's and value's length
/// (u32, little-endian), then each key and value followed by a NUL.
pub fn encode(map: &[(&str, &str)]) -> Vec<u8> {
    let len32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    let mut out = Vec::with_capacity(
        4 + map
            .iter()
            .map(|(k, v)| k.len() + v.len() + 10)
            .sum::<usize>(),
    );
    out.extend_from_slice(&len32(map.len()));
    for (k, v) in map {
        out.extend_from_slice(&len32(k.len()));
        out.extend_from_slice(&len32(v.len()));
    }
    for (k, v) in map {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// The proxy-wasm map encoding read back (see [`encode`]); a
/// truncated map ends where it stops making sense.
pub fn pairs(bytes: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let word = |at: usize| read_u32(bytes, at).map(|n| n as usize);
    let n = word(0).unwrap_or(0);
    let mut p = 4usize.saturating_add(n.saturating_mul(8));
    (0..n).map_while(move |i| {
        let (k, v) = (word(4 + i * 8)?, word(8 + i * 8)?);
        let key = bytes.get(p..p.checked_add(k)?)?;
        p = p.checked_add(k)?.checked_add(1)?;
        let value = bytes.get(p..p.checked_add(v)?)?;
        p = p.checked_add(v)?.checked_add(1)?;
        Some((key, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_pairs_read_back_what_was_written_and_stop_at_garbage() {
        let m = encode(&[("x-login", "a"), ("other", ""), ("x-login", "b")]);
        let got: Vec<_> = pairs(&m).collect();
        assert_eq!(
            got,
            [
                (&b"x-login"[..], &b"a"[..]),
                (b"other", b""),
                (b"x-login", b"b")
            ]
        );
        assert_eq!(pairs(&m[..m.len() - 3]).count(), 2, "truncated");
        assert_eq!(pairs(&[0xff, 0xff, 0xff, 0x7f]).count(), 0);
        assert_eq!(pairs(&[]).count(), 0);
    }
}
