//! What a request does: read, write or discard. Its own file, so that
//! the request generator and the trace readers both name it without
//! importing each other.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    Read,
    Write,
    /// A discard of the range (`Device::discard`).
    Trim,
}
