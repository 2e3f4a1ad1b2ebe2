//! Errors of remote requests: one line each (URL, request, cause down to the socket's own
//! words, such as "connection refused"), and a kind the layers above decide by.
//!
//! A failure reaches the layers above as a `std::io::Error` whose [`std::io::ErrorKind`] is
//! the remote kind's own ([`RemoteKind::io_kind`]), one kind each, so that the kind
//! survives wherever an error is kept and handed on as a kind and a message (the page
//! cache hands a fetch's error to every reader that waited for it) and is read back with
//! [`RemoteKind::of`], never by searching the message.

use std::error::Error as StdError;
use std::io::ErrorKind;

use object_store::client::{HttpError, HttpErrorKind};

use super::net::Refused;

/// What went wrong with a remote request, as far as a reader cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteKind {
    /// The object changed since it was opened (its ETag no longer matches).
    Changed,
    /// No such object or bucket.
    NotFound,
    /// Access refused, or no credentials.
    Denied,
    /// A failure that another try may mend (no answer, a 5xx, a connection cut).
    Transient,
    /// Retried until the time bound, in vain; or the bound ran out.
    Exhausted,
    /// An answer that is not the bytes asked for (another content encoding, another range,
    /// the whole object, a redirect not followed, a body too long).
    Refused,
    /// The request could not be made as given (a bad URL or option).
    Invalid,
}

impl RemoteKind {
    /// The `std::io` kind that carries this kind (one each).
    pub fn io_kind(self) -> ErrorKind {
        match self {
            RemoteKind::Changed => ErrorKind::StaleNetworkFileHandle,
            RemoteKind::NotFound => ErrorKind::NotFound,
            RemoteKind::Denied => ErrorKind::PermissionDenied,
            RemoteKind::Transient => ErrorKind::ResourceBusy,
            RemoteKind::Exhausted => ErrorKind::TimedOut,
            RemoteKind::Refused => ErrorKind::InvalidData,
            RemoteKind::Invalid => ErrorKind::InvalidInput,
        }
    }

    /// The remote kind an I/O error carries, if it came from a remote request.
    pub fn of(e: &std::io::Error) -> Option<RemoteKind> {
        Some(match e.kind() {
            ErrorKind::StaleNetworkFileHandle => RemoteKind::Changed,
            ErrorKind::NotFound => RemoteKind::NotFound,
            ErrorKind::PermissionDenied => RemoteKind::Denied,
            ErrorKind::ResourceBusy => RemoteKind::Transient,
            ErrorKind::TimedOut => RemoteKind::Exhausted,
            ErrorKind::InvalidData => RemoteKind::Refused,
            ErrorKind::InvalidInput => RemoteKind::Invalid,
            _ => return None,
        })
    }
}

/// An error of `kind` about request `what` to `url`, for `cause`.
pub(super) fn remote_err(
    kind: RemoteKind,
    url: &str,
    what: &str,
    cause: impl std::fmt::Display,
) -> std::io::Error {
    std::io::Error::new(
        kind.io_kind(),
        format!("{url}: {what}: {}", one_line(&cause.to_string())),
    )
}

/// A transient failure of request `what` to `url`.
pub(super) fn io_err(url: &str, what: &str, e: impl std::fmt::Display) -> std::io::Error {
    remote_err(RemoteKind::Transient, url, what, e)
}

/// `text` on one line and at most 300 characters (a server's answer may be a page of XML).
pub(super) fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

pub(super) fn bad_url(url: &str, why: &str) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidInput, format!("{url}: {why}"))
}

/// `e` and its causes, each said once: `reqwest` names only the request ("error sending
/// request") and keeps the reason ("Connection refused") in its sources.
pub(crate) fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    let mut depth = 0;
    while let Some(s) = source {
        let said = s.to_string();
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = s.source();
        depth += 1;
        if depth > 16 {
            break;
        }
    }
    text
}

/// The kind of a failure among the causes of `e`, when one of them says (an answer we
/// refused; the HTTP client's own kinds).
pub(super) fn cause_kind(e: &(dyn StdError + 'static)) -> Option<RemoteKind> {
    let mut source = Some(e);
    let mut depth = 0;
    while let Some(s) = source {
        if s.downcast_ref::<Refused>().is_some() {
            return Some(RemoteKind::Refused);
        }
        if let Some(h) = s.downcast_ref::<HttpError>() {
            return Some(match h.kind() {
                HttpErrorKind::Decode => RemoteKind::Refused,
                _ => RemoteKind::Transient,
            });
        }
        source = s.source();
        depth += 1;
        if depth > 16 {
            break;
        }
    }
    None
}

/// The error of request `what` to `url` that failed with `e`, of its kind.
pub(super) fn classify(url: &str, what: &str, e: object_store::Error) -> std::io::Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => {
            return remote_err(RemoteKind::NotFound, url, what, "no such object");
        }
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => RemoteKind::Denied,
        object_store::Error::Precondition { .. } => {
            return remote_err(
                RemoteKind::Changed,
                url,
                what,
                "the object changed since it was mounted (ETag no longer matches)",
            );
        }
        e => cause_kind(e).unwrap_or(RemoteKind::Transient),
    };
    match kind {
        RemoteKind::Denied => remote_err(kind, url, what, format!("access denied: {}", chain(&e))),
        _ => remote_err(kind, url, what, chain(&e)),
    }
}

/// The error of request `what` to `url` that ran out of time (`bound`).
pub(super) fn out_of_time(url: &str, what: &str, bound: std::time::Duration) -> std::io::Error {
    remote_err(
        RemoteKind::Exhausted,
        url,
        what,
        format!(
            "no answer within {:.0} s (the retry bound and one request's timeout)",
            bound.as_secs_f64()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_survives_as_its_io_kind() {
        use RemoteKind::*;
        for k in [
            Changed, NotFound, Denied, Transient, Exhausted, Refused, Invalid,
        ] {
            let e = remote_err(k, "http://h/f", "GET", "why");
            assert_eq!(RemoteKind::of(&e), Some(k));
            // Handed on as a kind and a message, as the page cache does.
            let again = std::io::Error::new(e.kind(), e.to_string());
            assert_eq!(RemoteKind::of(&again), Some(k));
        }
        assert_eq!(RemoteKind::of(&std::io::Error::other("x")), None);
    }

    #[test]
    fn a_chain_says_each_cause_once() {
        let inner = std::io::Error::new(ErrorKind::ConnectionRefused, "Connection refused");
        let outer = std::io::Error::other(Wrap(inner));
        let text = chain(&outer);
        assert!(text.contains("error sending request"), "{text}");
        assert!(text.contains("Connection refused"), "{text}");
        assert_eq!(text.matches("Connection refused").count(), 1, "{text}");
    }

    #[derive(Debug)]
    struct Wrap(std::io::Error);
    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("error sending request")
        }
    }
    impl StdError for Wrap {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }
}
