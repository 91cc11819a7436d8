//! One account, one key, however it is spelled: Unicode compatibility
//! forms (fullwidth `ａｌｉｃｅ`, mathematical `𝐚𝐥𝐢𝐜𝐞`, the ligature `ﬁ`),
//! canonical ones (`é` as one code point or as `e` + U+0301) and case
//! (`ALICE`, `ǅ`, the Kelvin sign, `ß` and `ss`) all fold to one string.
//!
//! The fold is Unicode's NFKC_Casefold, computed as the standard's
//! compatibility caseless match does (D146: NFKD(toCasefold(NFKD(
//! toCasefold(NFD(X)))))) and recomposed to NFKC, with default-ignorable
//! code points (zero-width space and joiners, soft hyphen, variation
//! selectors, bidi controls) removed and white space trimmed. Servers
//! that apply any of these steps (Django's login form applies NFKC,
//! ASP.NET compares names case-insensitively) then never sign in one
//! account under two counters; a server that applies none only has more
//! accounts share one counter, which errs towards refusing.

use super::Unreadable;
use caseless::Caseless;
use unicode_normalization::UnicodeNormalization;

/// The longest account read, in characters: longer than any server keeps
/// (Django's 150, a `VARCHAR(255)`), and the fold's work stays small.
pub(crate) const MAX_CHARS: usize = 512;

/// The key a name read from a request is counted under: refused when it
/// holds a control character, [`Unreadable::Missing`] when nothing is left.
///
/// A control character (Unicode's Cc: C0, DEL, C1) is refused, not folded:
/// servers drop some of them and keep others (Java's `String.trim` drops
/// every character up to U+0020 at either end, Python's `str.strip`
/// U+001C–U+001F but not U+0001), so no fold reads `victim\u{1}` the way
/// every server does; a refusal is the one reading they all agree with.
///
/// The key is the name folded ([`normalize`]) then collated
/// ([`super::collate`]: what the databases applications look accounts up in
/// equate), so a look-alike spelling a database signs in as the account
/// (`vıctim`, `victím`) is counted as it. A name holding a character no
/// key counts right ([`super::unsettled`]), or nothing a collation weighs,
/// is refused.
pub fn key(raw: &str) -> Result<String, Unreadable> {
    if raw.chars().nth(MAX_CHARS).is_some() {
        return Err(Unreadable::TooLong);
    }
    if raw.chars().any(char::is_control) {
        return Err(Unreadable::ControlCharacter);
    }
    if raw.chars().any(super::unsettled) {
        return Err(Unreadable::Unsettled);
    }
    let folded = normalize(raw).ok_or(Unreadable::Missing)?;
    let key = super::collate(&folded);
    if key.is_empty() {
        return Err(Unreadable::Unsettled);
    }
    Ok(key)
}

/// The fold of a name without control characters; `None` when nothing is
/// left.
pub fn normalize(raw: &str) -> Option<String> {
    let folded = fold(raw);
    let t = folded.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// NFKC_Casefold without trimming (field names are compared with it too).
pub fn fold(raw: &str) -> String {
    // ASCII is its own NFD, NFKD and NFKC, holds no default-ignorable code
    // point and case-folds to its lowercase: the same fold, without the
    // normalizers' buffers (most of a sign-in's work here).
    if raw.is_ascii() {
        return raw.to_ascii_lowercase();
    }
    fold_any(raw)
}

/// [`fold`] the long way, for any text.
fn fold_any(raw: &str) -> String {
    raw.chars()
        .nfd()
        .default_case_fold()
        .nfkd()
        .default_case_fold()
        .nfkc()
        .filter(|c| !default_ignorable(*c))
        .collect()
}

/// Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt,
/// Unicode 16): characters that render as nothing, so that `ali\u{200B}ce`
/// is `alice`.
fn default_ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_canonical_and_case_spellings_are_one_account() {
        let alice = normalize("alice");
        for spelling in [
            "  Alice ",
            "ALICE",
            "ａｌｉｃｅ",            // fullwidth
            "𝐚𝐥𝐢𝐜𝐞",                 // mathematical bold
            "𝔞𝔩𝔦𝔠𝔢",                 // fraktur
            "ali\u{200B}ce",         // zero-width space
            "ali\u{00AD}ce",         // soft hyphen
            "\u{FEFF}alice",         // a BOM inside the string
            "\u{3000}alice\u{3000}", // ideographic spaces
        ] {
            assert_eq!(normalize(spelling), alice, "{spelling:?}");
        }
        // NFC and NFD of one name.
        assert_eq!(normalize("jos\u{e9}"), normalize("jose\u{301}"));
        assert_eq!(normalize("JOS\u{c9}"), normalize("jose\u{301}"));
        // Full case folding, not just lowercasing.
        assert_eq!(normalize("STRASSE"), normalize("straße"));
        assert_eq!(normalize("\u{212A}elvin"), normalize("kelvin")); // Kelvin sign
        assert_eq!(normalize("\u{FB01}x"), normalize("fix")); // ligature fi
        assert_eq!(normalize("ΣΊΣΥΦΟΣ"), normalize("σίσυφος"));
        assert_eq!(normalize(" \t "), None);
        assert_eq!(normalize("\u{200B}"), None);
        // Different names stay different.
        assert_ne!(normalize("alice"), normalize("alicé"));
        assert_ne!(normalize("bob"), normalize("b0b"));
    }

    #[test]
    fn ascii_folds_as_the_long_way_does() {
        // Every ASCII character alone, and beside every other one.
        let all: Vec<char> = (0u8..128).map(char::from).collect();
        for a in &all {
            for b in &all {
                let s: String = [*a, 'X', *b].iter().collect();
                assert_eq!(fold(&s), fold_any(&s), "{s:?}");
            }
        }
        assert_eq!(fold("Bench-1 X_Login"), "bench-1 x_login");
        // Not ASCII: the long way.
        assert_eq!(fold("STRAẞE"), fold_any("STRAẞE"));
        assert_eq!(fold("STRAẞE"), "strasse");
    }

    #[test]
    fn folding_is_idempotent() {
        for s in ["ǅemal", "ﬃ", "ᾳ", "İstanbul", "ΐ", "ŉ", "𝐀"] {
            let once = fold(s);
            assert_eq!(fold(&once), once, "{s:?}");
        }
    }
}
