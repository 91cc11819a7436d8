//! The account a sign-in request tries, for `per: account` bounds: read the
//! way servers read it, or not at all.
//!
//! The installation counter is worth only what its key is worth, and every
//! part of a request is the attacker's to choose. So the account is taken
//! only from a request whose every reading agrees:
//! - the carrier the route names (a JSON body field, a urlencoded form
//!   field, a header), with that carrier's content type (`charset` UTF-8 or
//!   none), no content encoding, a body within the cap, UTF-8 throughout;
//! - every place a server might read instead: the field under any case or
//!   compatibility spelling of its name (ASP.NET binds names
//!   case-insensitively), every repetition in the body, the query string
//!   (servlet-style `getParameter` reads it first), every copy of a
//!   repeated header. All of them must name one account.
//!
//! Anything else is [`Unreadable`]: the request is refused with a status
//! that says why (400, 413, 415), never asked about and never counted
//! somewhere else: a per-address fallback would be a counter the attacker
//! chooses. Names are folded by [`normalize`] (NFKC_Casefold).

mod body;
mod carrier;
mod collation;
mod normalize;

pub use crate::config::plan::account::{header_spellings, place, Place};
pub use carrier::Head;
pub use collation::{collate, unsettled};
pub use normalize::{fold, key, normalize};

/// Why a sign-in's account cannot be read with certainty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// No account: no field, an empty name, no header.
    Missing,
    /// The field holds a number, `null`, an object or a list.
    NotAString,
    /// Named more than once with different values.
    Ambiguous,
    /// The body is not well-formed for its content type.
    Malformed,
    /// Not UTF-8, or UTF-8 behind a byte-order mark.
    NotUtf8,
    /// The body is larger than the route reads.
    TooLarge { cap: usize },
    /// The content type is not the carrier's (or is given twice, or names a
    /// charset other than UTF-8).
    ContentType,
    /// The body is compressed (`content-encoding`): a server may inflate
    /// it, this filter does not.
    ContentEncoding,
    /// The account holds a control character (C0, DEL, C1), which servers
    /// drop or keep each their own way ([`key`]).
    ControlCharacter,
    /// A header-carried account with a byte past ASCII: servers decode
    /// header bytes each their own way (latin-1, UTF-8).
    NotAscii,
    /// The account holds a character databases read in ways no one key
    /// follows (`𝐚`: `a` to MySQL 8, any emoji to MariaDB's default), or
    /// nothing a collation weighs (emoji, marks only).
    Unsettled,
    /// Longer than any server keeps an account ([`normalize::MAX_CHARS`]).
    TooLong,
}

impl Unreadable {
    /// The status the request is refused with.
    pub fn status(self) -> u16 {
        match self {
            Unreadable::TooLarge { .. } => 413,
            Unreadable::ContentType | Unreadable::ContentEncoding => 415,
            _ => 400,
        }
    }

    /// A word for logs, stats and the problem body.
    pub fn reason(self) -> &'static str {
        match self {
            Unreadable::Missing => "missing",
            Unreadable::NotAString => "not_a_string",
            Unreadable::Ambiguous => "ambiguous",
            Unreadable::Malformed => "malformed",
            Unreadable::NotUtf8 => "not_utf8",
            Unreadable::TooLarge { .. } => "too_large",
            Unreadable::ContentType => "content_type",
            Unreadable::ContentEncoding => "content_encoding",
            Unreadable::ControlCharacter => "control_character",
            Unreadable::NotAscii => "not_ascii",
            Unreadable::Unsettled => "unsettled_character",
            Unreadable::TooLong => "too_long",
        }
    }

    /// What the client is told, for a route whose account is in `place`.
    pub(crate) fn detail(self, place: Place) -> String {
        let carrier = match place {
            Place::Json(f) => {
                format!("the JSON body's field {f:?} (content-type application/json)")
            }
            Place::Form(f) => {
                format!("the form field {f:?} (content-type application/x-www-form-urlencoded)")
            }
            Place::Header(h) => format!("the header {h:?}"),
        };
        let why = match self {
            Unreadable::Missing => "the request names no account".to_string(),
            Unreadable::NotAString => "the account is not a string".to_string(),
            Unreadable::Ambiguous => "the request names the account more than once (another \
                spelling of the field, the query string) with different values, or repeats \
                its header"
                .to_string(),
            Unreadable::Malformed => "the body is not well-formed".to_string(),
            Unreadable::NotUtf8 => {
                "the request is not UTF-8 (or starts with a byte-order mark)".to_string()
            }
            Unreadable::TooLarge { cap } => {
                format!("the body is larger than the {cap} bytes this sign-in route reads")
            }
            Unreadable::ContentType => {
                "the content type is not the one this sign-in route reads (charset UTF-8 or none)"
                    .to_string()
            }
            Unreadable::ContentEncoding => "the body is compressed (content-encoding)".to_string(),
            Unreadable::ControlCharacter => {
                "the account holds a control character (U+0000-U+001F, U+007F-U+009F)".to_string()
            }
            Unreadable::NotAscii => "the header's account is not ASCII (servers read other \
                header bytes as latin-1 or as UTF-8)"
                .to_string(),
            Unreadable::TooLong => format!(
                "the account is longer than {} characters",
                normalize::MAX_CHARS
            ),
            Unreadable::Unsettled => "the account holds a character databases read in \
                different ways (mathematical or enclosed letters, for one) or only characters \
                their collations ignore"
                .to_string(),
        };
        format!("{why}; name the account once, in {carrier}")
    }
}

/// Every reading of the account a request has given so far: one account,
/// none yet, or the first problem found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    account: Option<String>,
    problem: Option<Unreadable>,
}

impl Seen {
    /// One more place that names the account (`Err`: it names it in a way
    /// that cannot be read).
    pub fn add(&mut self, reading: Result<String, Unreadable>) {
        if self.problem.is_some() {
            return;
        }
        match (reading, &self.account) {
            (Err(e), _) => self.problem = Some(e),
            (Ok(a), None) => self.account = Some(a),
            (Ok(a), Some(b)) if a == *b => {}
            (Ok(_), Some(_)) => self.problem = Some(Unreadable::Ambiguous),
        }
    }

    /// One raw value, as its [`key`].
    pub(crate) fn add_raw(&mut self, raw: &str) {
        self.add(key(raw));
    }

    /// The account, if every reading named the same one.
    pub fn account(self) -> Result<String, Unreadable> {
        match (self.problem, self.account) {
            (Some(e), _) => Err(e),
            (None, Some(a)) => Ok(a),
            (None, None) => Err(Unreadable::Missing),
        }
    }
}

/// What a request's head says (header carrier: the account itself; body
/// carriers: that the body can be read, and what the query string names).
pub(crate) fn from_head(place: Place, head: &Head) -> Result<Seen, Unreadable> {
    carrier::read(place, head)
}

/// The account of a whole body (within the cap), given what the head said.
pub(crate) fn from_body(place: Place, body: &[u8], seen: Seen) -> Result<String, Unreadable> {
    body::read(place, body, seen)
}

#[cfg(test)]
mod tests;
