use std::fmt;
use std::io;
use std::path::PathBuf;

/// The kind of request that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Flush,
    /// A discard (fio's trim): the range's contents given up.
    Trim,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Trim => "trim",
        })
    }
}

pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// Everything a device request or a device open can fail with. Each
/// variant names the device and, where there is one, the request.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{device}: {op} of {len} bytes at offset {offset} failed: {source}")]
    Io {
        device: String,
        op: Op,
        offset: u64,
        len: u64,
        #[source]
        source: io::Error,
    },
    #[error("{device}: flush failed: {source}")]
    Flush {
        device: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "{device}: {op} of {len} bytes at offset {offset}: {what} not a multiple of {align} bytes \
         (requests must be whole sectors; with O_DIRECT buffers must be aligned too)"
    )]
    Misaligned { device: String, op: Op, offset: u64, len: u64, what: &'static str, align: u64 },
    #[error(
        "{device}: {op} of {len} bytes at offset {offset} runs past the end of the device ({size} bytes)"
    )]
    OutOfRange { device: String, op: Op, offset: u64, len: u64, size: u64 },
    #[error(
        "{device}: {op} refused: an earlier flush failed ({cause}); what reached stable storage is \
         unknown, so the device accepts no more writes until it is reopened"
    )]
    Poisoned { device: String, op: Op, cause: PoisonCause },
    #[error("{}: {what}: {source}", path.display())]
    Open {
        path: PathBuf,
        what: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "{}: in use by {holder}; wait for it to finish or stop it (iolab locks what it writes, so two \
         runs never write one volume, log or journal at once)",
        path.display()
    )]
    Locked {
        path: PathBuf,
        holder: String,
        /// The holder's process id, when /proc/locks tells it.
        pid: Option<u32>,
    },
    #[error("{0}")]
    Invalid(String),
}

impl DeviceError {
    /// True when the error is an I/O failure of the medium (as opposed to a
    /// malformed request).
    pub fn is_io(&self) -> bool {
        matches!(self, DeviceError::Io { .. } | DeviceError::Flush { .. })
    }

    /// True when the medium ran out of room (ENOSPC, EDQUOT): a file on a
    /// host file system that filled up, not a failing disk. A device
    /// poisoned by such an error says so too, so the layers above can
    /// tell their users what to free.
    pub fn is_out_of_space(&self) -> bool {
        match self {
            DeviceError::Io { source, .. } | DeviceError::Flush { source, .. } => no_room(source),
            DeviceError::Poisoned { cause, .. } => cause.out_of_space,
            _ => false,
        }
    }
}

fn no_room(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

/// Why a device was poisoned: the first failure, as text, and whether it
/// was the host running out of room (which the failure's error kind no
/// longer tells once it is only text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoisonCause {
    pub text: String,
    pub out_of_space: bool,
}

impl fmt::Display for PoisonCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<&DeviceError> for PoisonCause {
    fn from(e: &DeviceError) -> PoisonCause {
        PoisonCause { text: e.to_string(), out_of_space: e.is_out_of_space() }
    }
}

impl From<String> for PoisonCause {
    fn from(text: String) -> PoisonCause {
        PoisonCause { text, out_of_space: false }
    }
}

impl From<&str> for PoisonCause {
    fn from(text: &str) -> PoisonCause {
        PoisonCause::from(text.to_string())
    }
}
