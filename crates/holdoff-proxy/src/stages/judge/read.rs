//! A throttled response's hint as the judge stage reads it: the window it opens, the request
//! a redirect's hint is for, and the wall time of an instant.

use std::time::{Duration, Instant, SystemTime};

use holdoff::{Earliest, Receipt};
use http::{Method, StatusCode};

use crate::judge::{HintKind, WindowKind};
use crate::proxy::RequestMeta;

/// The request a client sends on following `status`'s `Location`, as the judge keys it: the
/// `Location` resolved against the request's URL, with the method a client follows with.
/// `None` for a redirect without a `Location` (`304`, `300` without one), or one that is no
/// `http` or `https` URL.
pub(super) fn followed(
    status: StatusCode,
    headers: &http::HeaderMap,
    meta: &RequestMeta,
) -> Option<RequestMeta> {
    let location = headers.get(http::header::LOCATION)?.to_str().ok()?;
    let target = meta.target.join(location)?;
    // RFC 9110 §15.4.4: a 303 is followed with GET (HEAD stays HEAD); §15.4.2–3: clients
    // change a POST to GET on 301 and 302.
    let method = match (status.as_u16(), &meta.method) {
        (303, method) if method != Method::HEAD => Method::GET,
        (301 | 302, method) if method == Method::POST => Method::GET,
        (_, method) => method.clone(),
    };
    Some(RequestMeta {
        method,
        target,
        ..meta.clone()
    })
}

/// Whether a hint from `source` asks a client to wait before its next request, as a
/// redirect's may: `Retry-After` and its millisecond spellings, not a rate limit's reset time.
pub(super) fn asks_to_wait(source: holdoff::HintSource) -> bool {
    use holdoff::HintSource;
    matches!(
        source,
        HintSource::RetryAfter
            | HintSource::RetryAfterMs
            | HintSource::XMsRetryAfterMs
            | HintSource::XAmzRetryAfter
    )
}

/// The longest wait a window holds as a time: the judge keeps times as nanoseconds since it
/// started (about 584 years in a `u64`). A longer hint opens a window that never closes, and
/// the reports say so, rather than naming a permitted time hundreds of years short of the
/// server's.
pub(super) const LONGEST_WAIT: Duration = Duration::from_secs(500 * 365 * 24 * 3600);

/// How long a shared store keeps a window that never closes.
pub(super) const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A throttle's hint as the judge reads it: the window it opens, and how it was read.
pub(super) struct Read {
    pub(super) kind: WindowKind,
    pub(super) hint: HintKind,
    /// `None`: never.
    pub(super) permitted_at: Option<Instant>,
    pub(super) source: Option<holdoff::HintSource>,
    pub(super) reading: &'static str,
}

impl Read {
    pub(super) fn of(earliest: Earliest, receipt: Receipt, min_backoff: Duration) -> Read {
        let backoff = receipt.instant.checked_add(min_backoff);
        match earliest {
            Earliest::At {
                after,
                source,
                reading,
            } => {
                let permitted_at = match after {
                    // Held as it is, the wait would be cut to what the judge's offsets hold,
                    // and the reports would name a permitted time the server never sent.
                    after if after > LONGEST_WAIT => None,
                    after => receipt.instant.checked_add(after),
                };
                Read {
                    kind: WindowKind::Hinted,
                    hint: if permitted_at.is_some() {
                        HintKind::Usable
                    } else {
                        HintKind::Unbounded
                    },
                    permitted_at,
                    source: Some(source),
                    reading: if permitted_at.is_some() {
                        reading.describe()
                    } else {
                        "longer than 500 years, more than the judge's clock holds: a window \
                         that never closes"
                    },
                }
            }
            Earliest::Malformed { source } => Read {
                kind: WindowKind::Malformed,
                hint: HintKind::Malformed,
                permitted_at: backoff,
                source: Some(source),
                reading: "malformed, so never zero: a retry must wait the minimum backoff",
            },
            _ => Read {
                kind: WindowKind::NoHint,
                hint: HintKind::None,
                permitted_at: backoff,
                source: None,
                reading: "no hint: the gap to the next request is measured against the minimum backoff",
            },
        }
    }
}

/// The wall time of a monotonic instant, through the receipt's pair of readings.
pub(crate) fn wall_of(receipt: Receipt, at: Instant) -> SystemTime {
    if at >= receipt.instant {
        receipt.wall + (at - receipt.instant)
    } else {
        receipt.wall - (receipt.instant - at)
    }
}

/// Whether a response carries any header a hint can come from: without one, no policy can
/// find an interval in it, so nothing needs to be read or built.
pub(super) fn has_hint_header(headers: &http::HeaderMap) -> bool {
    headers
        .keys()
        .any(|name| holdoff::HINT_HEADERS.contains(&name.as_str()))
}
