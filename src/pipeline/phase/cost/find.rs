//! Finding a byte in a run, eight bytes at a time: the scans of a body
//! (`cost_scan`'s lines, `json_scan`'s strings) look at every byte, and a
//! byte at a time costs the interpreter the module runs under a dozen
//! instructions or more a byte (issue 41). A word's bytes are tested at
//! once (the bit tricks below); the lowest byte they mark is exact, which
//! is all a search needs (a mark above it may be false).

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` that is zero (the lowest exact).
fn zero(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & HI
}

/// The high bit of each byte of `x` that is `b` (the lowest exact).
fn equal(x: u64, b: u8) -> u64 {
    zero(x ^ (LO * u64::from(b)))
}

/// The high bit of each byte of `x` below `n` (n ≤ 128; the lowest exact).
fn below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(LO * u64::from(n)) & !x & HI
}

/// The first byte of `bytes` that `word` marks (in a word read
/// little-endian) or `byte` says, or `bytes.len()`.
#[inline(always)]
fn first(bytes: &[u8], word: impl Fn(u64) -> u64, byte: impl Fn(u8) -> bool) -> usize {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for w in words.by_ref() {
        let x = u64::from_le_bytes(<[u8; 8]>::try_from(w).unwrap_or([0; 8]));
        let m = word(x);
        if m != 0 {
            return at + (m.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let tail = words.remainder();
    at + tail.iter().position(|&b| byte(b)).unwrap_or(tail.len())
}

/// Where the first newline in `bytes` is, if there is one.
#[inline(never)]
pub(crate) fn newline(bytes: &[u8]) -> Option<usize> {
    let at = first(bytes, |x| equal(x, b'\n'), |b| b == b'\n');
    (at < bytes.len()).then_some(at)
}

/// How many bytes of `bytes` a JSON string runs on before a quote, a
/// backslash or a control character (all of it, if none).
#[inline(never)]
pub(crate) fn string_run(bytes: &[u8]) -> usize {
    first(
        bytes,
        |x| equal(x, b'"') | equal(x, b'\\') | below(x, 0x20),
        |b| b == b'"' || b == b'\\' || b < 0x20,
    )
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Every byte value at every position of a run (and runs of every
    /// length around a word): the first found is the first there is.
    #[test]
    fn the_first_found_is_the_first_there_is() {
        for (len, fill) in (0..20).flat_map(|n| [b'a', 0x80, 0xFF, 0x21].map(|f| (n, f))) {
            for at in 0..=len {
                for b in 0..=255u8 {
                    let mut bytes = vec![fill; len];
                    if at < len {
                        bytes[at] = b;
                    }
                    // Bytes that would fool a carry, after the one sought.
                    bytes.extend_from_slice(&[0x80, 0xFF, 0x00, b'\n', 0x1F, 0x21, 0x0B]);
                    let want = |hit: &dyn Fn(u8) -> bool| {
                        bytes.iter().position(|&c| hit(c)).unwrap_or(bytes.len())
                    };
                    assert_eq!(
                        newline(&bytes).unwrap_or(bytes.len()),
                        want(&|c| c == b'\n'),
                        "{bytes:?}"
                    );
                    assert_eq!(
                        string_run(&bytes),
                        want(&|c| c == b'"' || c == b'\\' || c < 0x20),
                        "{bytes:?}"
                    );
                }
            }
        }
        assert_eq!(newline(b"no newline here, none at all"), None);
        assert_eq!(string_run(b"plain text, all of it"), 21);
    }
}
