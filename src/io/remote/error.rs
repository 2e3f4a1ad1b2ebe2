//! Errors of remote requests, on one line, with the kinds the layers above decide by.

pub(super) fn io_err(url: &str, what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{url}: {what}: {}", one_line(&e.to_string())))
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
    std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{url}: {why}"))
}

/// The same error as `e` for a request about `url`, with NotFound and PermissionDenied kinds
/// for a missing object or bucket and for refused access.
pub(super) fn classify(url: &str, what: &str, e: object_store::Error) -> std::io::Error {
    use std::io::ErrorKind;
    match e {
        object_store::Error::NotFound { .. } => {
            std::io::Error::new(ErrorKind::NotFound, format!("{url}: no such object"))
        }
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            std::io::Error::new(ErrorKind::PermissionDenied, format!("{url}: access denied"))
        }
        // A listing's refusal comes back as a generic error naming the status.
        e if [" 401 ", " 403 "].iter().any(|c| e.to_string().contains(c)) => {
            std::io::Error::new(ErrorKind::PermissionDenied, format!("{url}: access denied"))
        }
        e if e.to_string().contains(" 404 ") || e.to_string().contains("NoSuchBucket") => {
            std::io::Error::new(ErrorKind::NotFound, format!("{url}: no such bucket or key"))
        }
        e => io_err(url, what, e),
    }
}
