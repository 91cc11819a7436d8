//! A sign-in's account (`per: account` installation bounds): read from the
//! request's head, or from its body once it arrived. An account that
//! cannot be read with certainty is refused with why, asked about
//! nowhere, counted by no bound.

use crate::config::plan::Route;
use crate::config::Per;
use crate::identity::account::{self, Place, Unreadable};
use crate::pipeline::flight::{Flight, WaitFor};
use crate::pipeline::{Decision, Host, Worker};
use crate::stats::Stat;

/// An account that cannot be read with certainty (`why`), for a route
/// whose account is in `place`: refused ([`Refused::decision`]).
pub struct Refused<'p> {
    place: Place<'p>,
    why: Unreadable,
}

impl<'p> Refused<'p> {
    /// The 400, 413 or 415 of a sign-in on `route`.
    pub fn decision(self, route: &'p Route) -> Decision<'p> {
        Decision::Unreadable {
            route: &route.name,
            place: self.place,
            why: self.why,
        }
    }
}

/// Where `route` reads the account of a request counted by its
/// installation bounds, if one of them is `per: account`.
fn place_for<'p>(route: &'p Route, f: &Flight) -> Option<Place<'p>> {
    let per_account = f
        .bounds
        .iter()
        .any(|&i| route.bound(i).is_some_and(|b| b.per == Per::Account));
    route
        .account
        .as_ref()
        .filter(|_| per_account)
        .and_then(account::place)
}

/// More of the body than `route` reads for its account has arrived.
pub(in crate::pipeline) fn over_cap(route: &Route, size: usize) -> bool {
    route
        .account
        .as_ref()
        .is_some_and(|a| size > a.max_body_bytes)
}

impl<'p> Worker<'p> {
    /// What the head says of the account, before any of the body is waited
    /// for: the account (or none to read), the body to wait for, or a
    /// refusal of a body that cannot be read.
    pub(in crate::pipeline) fn account_from_head<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        f: &mut Flight,
    ) -> Result<Option<WaitFor>, Refused<'p>> {
        let Some(place) = place_for(route, f) else {
            return Ok(None);
        };
        let (content_type, content_encoding, path, header) = match place {
            Place::Header(_) => {
                // The header and its other spellings (compiled with the plan).
                let names: Vec<&str> = route.account_headers.iter().map(String::as_str).collect();
                (
                    Vec::new(),
                    Vec::new(),
                    None,
                    host.request_headers_named(&names),
                )
            }
            _ => (
                host.request_header_values("content-type"),
                host.request_header_values("content-encoding"),
                host.request_header(":path"),
                Vec::new(),
            ),
        };
        let head = account::Head {
            content_type: &content_type,
            content_encoding: &content_encoding,
            path: path.as_deref(),
            header: &header,
        };
        match account::from_head(place, &head) {
            Err(why) => Err(self.unreadable(host, place, why)),
            Ok(seen) if matches!(place, Place::Header(_)) => match seen.account() {
                Ok(a) => {
                    f.account = Some(a);
                    Ok(None)
                }
                Err(why) => Err(self.unreadable(host, place, why)),
            },
            Ok(seen) => {
                f.seen = seen;
                Ok(Some(WaitFor::Body))
            }
        }
    }

    /// The body arrived (`size` bytes, all of it unless over the cap): the
    /// account it names, or a refusal of a body that cannot be read.
    pub(in crate::pipeline) fn account_from_body<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        f: &mut Flight,
        size: usize,
    ) -> Result<(), Refused<'p>> {
        let source = route.account.as_ref();
        let Some((s, place)) = source.and_then(|s| Some((s, account::place(s)?))) else {
            return Ok(());
        };
        let read = if size > s.max_body_bytes {
            Err(Unreadable::TooLarge {
                cap: s.max_body_bytes,
            })
        } else {
            let body = host.request_body(size).unwrap_or_default();
            account::from_body(place, &body, std::mem::take(&mut f.seen))
        };
        match read {
            Ok(a) => {
                f.account = Some(a);
                Ok(())
            }
            Err(why) => Err(self.unreadable(host, place, why)),
        }
    }

    /// A sign-in whose account cannot be read with certainty: counted, and
    /// refused with why.
    fn unreadable<H: Host>(&self, host: &mut H, place: Place<'p>, why: Unreadable) -> Refused<'p> {
        host.count(Stat::AccountsUnreadable);
        Refused { place, why }
    }
}
