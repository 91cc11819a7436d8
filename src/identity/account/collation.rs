//! One account, one key, however the database reads it: the databases
//! applications look accounts up in equate more spellings than
//! NFKC_Casefold does. MySQL 8's default collation `utf8mb4_0900_ai_ci`
//! signs `victím` and `vıctim` in as `victim` (accent-insensitive, at
//! primary strength); MySQL 5.7's and MariaDB 10's `utf8mb4_general_ci`
//! signs `vıctim` and `ßam` in as `victim` and `sam`; MariaDB 11's
//! `utf8mb4_uca1400_ai_ci` ignores combining marks (`vic\u{334}tim`).
//! A key that told those apart would give an attacker a fresh counter per
//! spelling.
//!
//! [`collate`] takes a [`normalize`](super::normalize)d name and folds it
//! further, so that every two names one of these collations weighs alike
//! share a key (docs/collations.md):
//!
//! 1. canonical decomposition (NFD: `é` is `e` and a mark, a Hangul
//!    syllable its jamo);
//! 2. the generated table (collation_table.rs, from the weights of a real
//!    MariaDB and of DUCET 9.0.0; scripts/gen-collation-table.py): letters
//!    weighed alike map to one (`ı` `i`, `ø` `o`, `đ` `d`, hiragana for
//!    katakana, ASCII digits for every script's), expansions to a string
//!    (`æ` `ae`, `œ` `oe`), primary-ignorable characters (combining marks,
//!    format characters) are dropped, and so are the space and `ι` (the
//!    UCA ignores U+FE70 `ﹰ`, which NFKC makes a space and a mark, and the
//!    iota subscript, which case folding makes `ι`);
//! 3. every supplementary-plane character is dropped: `utf8mb4_general_ci`
//!    weighs them all as U+FFFD (so U+FFFD is dropped too), and the UCA
//!    collations ignore some of them;
//! 4. White_Space trimmed (PAD SPACE collations ignore trailing spaces);
//! 5. the prevowels of Thai, Lao, New Tai Lue and Tai Viet
//!    (Logical_Order_Exception) moved to the end, in their order: the UCA
//!    weighs `เก` as `กเ`;
//! 6. a run of `s` is one `s` (general_ci weighs `ß` as `s`, the UCA as
//!    `ss`, and normalize makes it `ss`); `·` after `l` is dropped (the
//!    UCA's `l·` is `l`); a hamza goes before the alefs, waws and yehs
//!    right before it (uca1400 weighs `ٵ` as hamza then alef, NFKC makes
//!    it alef then hamza);
//! 7. MariaDB weighs a long expansion by its start only: `ﷺ` (NFKC: `صلى
//!    الله عليه وسلم`) is `صلى الله` to it, so the key of the whole phrase
//!    is the key of its start (collation_table.rs's TRUNCATE).
//!
//! Folding more than a database does only puts more accounts on one
//! counter (`missis` and `misis` share one), which errs towards refusing.
//! The result may be empty (a name of marks only); it is its own key:
//! `collate(collate(x)) == collate(x)`.

use unicode_normalization::UnicodeNormalization;

#[path = "collation_table.rs"]
mod table;

use table::{DROP, EXPAND, SINGLE, TRUNCATE, UNSETTLED};

/// A character no key counts right: `utf8mb4_general_ci` weighs it as
/// every other supplementary character (U+FFFD), while normalize or a UCA
/// collation reads it as a BMP letter (`𝐚` is `a`, `🅼` is `m`). A name
/// holding one is refused.
pub fn unsettled(c: char) -> bool {
    let cp = u32::from(c);
    let i = UNSETTLED.partition_point(|&(lo, _)| lo <= cp);
    i > 0 && UNSETTLED.get(i - 1).is_some_and(|&(_, hi)| cp <= hi)
}

/// The key of a folded name (`normalize`'s output): see the module.
pub fn collate(folded: &str) -> String {
    // ASCII is its own NFD: no decomposer for it.
    if folded.is_ascii() {
        collate_nfd(folded)
    } else {
        collate_nfd(&folded.nfd().collect::<String>())
    }
}

/// [`collate`] of a name in NFD: steps 2 to 7.
fn collate_nfd(nfd: &str) -> String {
    let mut mapped = String::with_capacity(nfd.len());
    for c in nfd.chars() {
        map_char(c, &mut mapped);
    }
    let trimmed = mapped.trim();
    let ordered = trimmed
        .chars()
        .filter(|c| !prevowel(*c))
        .chain(trimmed.chars().filter(|c| prevowel(*c)));
    let mut out: Vec<char> = Vec::with_capacity(trimmed.len());
    for c in ordered {
        match (out.last(), c) {
            (Some('s'), 's') | (Some('l'), '\u{B7}') => {}
            (_, HAMZA) => {
                let carriers = out.iter().rev().take_while(|c| HAMZA_CARRIERS.contains(c));
                let at = out.len() - carriers.count();
                out.insert(at, HAMZA);
            }
            _ => out.push(c),
        }
    }
    let out: String = out.into_iter().collect();
    let mut out = match out.trim() {
        t if t.len() == out.len() => out,
        t => t.to_string(),
    };
    for (long, short) in TRUNCATE {
        if out.contains(long) {
            out = out.replace(long, short);
        }
    }
    out
}

/// U+0621, the hamza (and what the table maps to it, U+0674 among them).
const HAMZA: char = '\u{621}';
/// Alef, waw, U and yeh: NFKC writes their high-hamza forms (U+0675-0678)
/// as the letter then U+0674; uca1400 weighs them as the hamza then the
/// letter. So a hamza goes before the carriers right before it.
const HAMZA_CARRIERS: [char; 4] = ['\u{627}', '\u{648}', '\u{6C7}', '\u{64A}'];

/// One character through the table: dropped, mapped to one or to a string.
fn map_char(c: char, out: &mut String) {
    let Ok(cp) = u16::try_from(u32::from(c)) else {
        return; // supplementary: dropped
    };
    if dropped(cp) {
        return;
    }
    if let Ok(i) = EXPAND.binary_search_by_key(&cp, |&(from, _)| from) {
        if let Some((_, to)) = EXPAND.get(i) {
            out.push_str(to);
            return;
        }
    }
    let to = SINGLE
        .binary_search_by_key(&cp, |&(from, _)| from)
        .ok()
        .and_then(|i| SINGLE.get(i))
        .and_then(|&(_, to)| char::from_u32(u32::from(to)));
    out.push(to.unwrap_or(c));
}

fn dropped(cp: u16) -> bool {
    let i = DROP.partition_point(|&(lo, _)| lo <= cp);
    i > 0 && DROP.get(i - 1).is_some_and(|&(_, hi)| cp <= hi)
}

/// Unicode's Logical_Order_Exception.
fn prevowel(c: char) -> bool {
    matches!(
        c,
        '\u{0E40}'..='\u{0E44}'
            | '\u{0EC0}'..='\u{0EC4}'
            | '\u{19B5}'..='\u{19B7}'
            | '\u{19BA}'
            | '\u{AAB5}'
            | '\u{AAB6}'
            | '\u{AAB9}'
            | '\u{AABB}'
            | '\u{AABC}'
    )
}

#[cfg(test)]
mod tests {
    use super::super::normalize;
    use super::*;

    fn key(raw: &str) -> String {
        collate(&normalize(raw).unwrap_or_default())
    }

    #[test]
    fn ascii_collates_as_its_nfd_does() {
        let all: Vec<char> = (0u8..128).map(char::from).collect();
        for a in &all {
            for b in &all {
                let s: String = [*a, 's', *b, ' '].iter().collect();
                assert_eq!(
                    collate(&s),
                    collate_nfd(&s.nfd().collect::<String>()),
                    "{s:?}"
                );
            }
        }
    }

    #[test]
    fn look_alikes_the_databases_sign_in_are_one_key() {
        let victim = key("victim");
        assert_eq!(victim, "victim");
        for spelling in [
            "vıctim",               // dotless i: general_ci
            "victím",               // accent: the ai collations
            "vic\u{AD}tim",         // soft hyphen (normalize)
            "vic\u{334}tim",        // a combining mark the UCA ignores
            "vic\u{301}\u{334}tim", // ć and a mark
            "VİCTİM",               // dotted capital I: i and U+0307
            "ｖｉｃｔｉｍ",         // fullwidth (normalize)
            "victim\u{FE70}",       // an Arabic isolated vowel mark the UCA ignores
            "vic tim",              // the space (see the module)
            "victim😀",             // supplementary: general_ci's U+FFFD
        ] {
            assert_eq!(key(spelling), victim, "{spelling:?}");
        }
        for (a, b) in [
            ("ı", "i"),
            ("ø", "o"),
            ("đ", "d"),
            ("í", "i"),
            ("ł", "l"),
            ("æ", "ae"),
            ("œ", "oe"),
            ("ß", "s"),
            ("straße", "strase"),
            ("col·lega", "collega"),
            ("ᾳ", "α"),
            ("\u{0438}\u{0306}", "\u{0438}"), // й, as MariaDB reads и U+0334 U+0306
            ("เก", "กเ"),                     // Thai prevowel
            ("가", "\u{1100}\u{1161}"),       // Hangul syllable and jamo
            ("٣", "3"),                       // Arabic-Indic digit
            ("カ", "か"),                     // katakana, hiragana
            ("ٵ", "ءا"),                      // high hamza alef, as uca1400 weighs it
            ("ﷺ", "صلى الله"),                // MariaDB's truncated expansion
        ] {
            assert_eq!(key(a), collate(b), "{a:?} {b:?}");
        }
        assert_eq!(key("straße"), key("strasse"));
        assert_eq!(key("😀bob"), key("🙂bob"));
        assert_eq!(collate("\u{301}"), "");
        // Different names stay different.
        assert_ne!(key("alice"), key("alicf"));
        assert_ne!(key("bob"), key("b0b"));
        assert_ne!(key("и"), key("е"));
    }

    #[test]
    fn the_table_is_sorted_and_its_outputs_are_keys() {
        assert!(SINGLE.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(EXPAND.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(DROP.windows(2).all(|w| w[0].1 < w[1].0));
        assert!(DROP.iter().all(|&(lo, hi)| lo <= hi));
        for &(from, to) in SINGLE {
            let to = char::from_u32(u32::from(to)).unwrap().to_string();
            assert_eq!(collate(&to), to, "U+{from:04X}");
        }
        for &(from, to) in EXPAND {
            assert_eq!(collate(to), to, "U+{from:04X}");
        }
        for &(long, short) in TRUNCATE {
            assert_eq!(collate(long), short);
            assert_eq!(collate(short), short);
        }
    }

    #[test]
    fn collating_is_idempotent_over_the_bmp() {
        for cp in 0..=0xFFFF_u32 {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            for s in [c.to_string(), format!("v{c}v"), key(&c.to_string())] {
                let once = collate(&s);
                assert_eq!(collate(&once), once, "U+{cp:04X} in {s:?}");
            }
        }
    }

    #[test]
    fn collating_is_idempotent_over_random_names() {
        // Characters collation treats specially, and some others.
        let pool: Vec<char> = "aeilsvß·ıøæœ ιαᾳเแกขໄກᦵꪵ가\u{1100}\u{1161}\u{11A8}\u{301}\u{334}\u{345}\u{306}и\u{FE70}\u{FFFD}😀𝐚ΐ٣カ"
            .chars()
            .chain((0..64).filter_map(|i| char::from_u32(0x0300 + i * 997 % 0xFC00)))
            .collect();
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = 1 + next() % 8;
            let s: String = (0..len)
                .map(|_| pool[(next() % pool.len() as u64) as usize])
                .collect();
            for s in [s.clone(), normalize(&s).unwrap_or_default()] {
                let once = collate(&s);
                assert_eq!(collate(&once), once, "{s:?}");
            }
        }
    }
}
