//! What a client's `no-cache` / `max-age` may force, once the mount heeds
//! them (`client_no_cache = "revalidate"`): such a request's validation joins the key's
//! flight like any other, and when that flight lands, the entry it left is the validation
//! the client asked for. Decisions only; the exchange (`proxy::cache`) acts on them.

use linerate_cache::status::Fwd;
use linerate_cache::{ClientNoCache, Options, Plan, Time};

/// Whether `plan`, made again for a request that waited on its key's flight since
/// `waited_since`, asks to validate an entry that was received during that wait (whole
/// seconds: one received in the second it joined counts): the flight's answer, which
/// validated it, so the client's `no-cache` or `max-age` is met without another request.
pub(crate) fn flight_validated(plan: &Plan, waited_since: Option<Time>) -> bool {
    match (plan, waited_since) {
        (
            Plan::Forward {
                validate: Some(entry),
                fwd: Fwd::Request,
                ..
            },
            Some(since),
        ) => entry.timing.response_time >= since,
        _ => false,
    }
}

/// `opts` for planning such a request again: its `no-cache` and `max-age` met by the flight.
pub(crate) fn met(opts: &Options) -> Options {
    Options {
        client_no_cache: ClientNoCache::Ignore,
        ..opts.clone()
    }
}
