//! Where a sign-in names its account, and the header names it is read
//! under: the written source's reading, spelled out once with the plan
//! (the request's pipeline reads the names; the identity floor reads the
//! account from them).

use crate::config::AccountSource;

/// Where the account is, once the route's source is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place<'a> {
    Json(&'a str),
    Form(&'a str),
    Header(&'a str),
}

pub fn place(s: &AccountSource) -> Option<Place<'_>> {
    s.json
        .as_deref()
        .map(Place::Json)
        .or_else(|| s.form.as_deref().map(Place::Form))
        .or_else(|| s.header.as_deref().map(Place::Header))
}

/// The other spellings of a carrier header's name that servers read as it:
/// Rack and CGI-style servers (Puma, WEBrick) turn `-` and `_` alike into
/// `_` (`HTTP_X_LOGIN`), so `x_login` names the account `x-login` carries.
/// Every mix of the two for up to four separators; past that, the
/// all-`-` and all-`_` spellings.
pub fn header_spellings(name: &str) -> Vec<String> {
    let seps: Vec<usize> = name
        .bytes()
        .enumerate()
        .filter(|(_, b)| matches!(b, b'-' | b'_'))
        .map(|(i, _)| i)
        .collect();
    let mut out: Vec<String> = if seps.len() <= 4 {
        (0u32..1 << seps.len())
            .map(|mask| {
                let mut b = name.as_bytes().to_vec();
                for (bit, &i) in seps.iter().enumerate() {
                    if let Some(c) = b.get_mut(i) {
                        *c = if mask >> bit & 1 == 1 { b'_' } else { b'-' };
                    }
                }
                String::from_utf8_lossy(&b).into_owned()
            })
            .collect()
    } else {
        vec![name.replace('_', "-"), name.replace('-', "_")]
    };
    out.retain(|n| n != name);
    out.dedup();
    out
}

/// The header an account is read from and its other spellings, in the
/// order they are read (none when the account is not in a header).
pub(super) fn headers(source: Option<&AccountSource>) -> Vec<String> {
    match source.and_then(place) {
        Some(Place::Header(h)) => std::iter::once(h.to_string())
            .chain(header_spellings(h))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_name_in_every_spelling_of_its_separators() {
        assert_eq!(header_spellings("x-login"), ["x_login"]);
        assert_eq!(header_spellings("x_login"), ["x-login"]);
        assert_eq!(
            header_spellings("x-user-name"),
            ["x_user-name", "x-user_name", "x_user_name"]
        );
        assert!(header_spellings("login").is_empty());
        assert_eq!(header_spellings("a-b-c-d-e-f").len(), 1);
    }
}
