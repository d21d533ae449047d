//! FUSE over io_uring (Linux 6.14 and later, with the fuse module's
//! `enable_uring` parameter on): the kernel keeps a queue of requests per
//! CPU and hands each request to the queue of the CPU its caller runs on.
//! One thread per queue, pinned to that queue's CPU, registers a few
//! request buffers (ring entries) with the kernel and then, for each
//! completion, answers the request in place and commits the answer while
//! fetching the next (`FUSE_IO_URING_CMD_COMMIT_AND_FETCH`), one system
//! call for both.
//!
//! Why: through /dev/fuse a request wakes whichever server thread waits
//! longest, often on another CPU; in a virtual machine waking an idle
//! vCPU costs tens of microseconds, and GNU tar makes about seven requests
//! a file. Here the server thread that answers runs where the caller runs.
//!
//! INIT, FORGET and INTERRUPT still come through /dev/fuse (the `fuser`
//! session serves them); every other request comes through the rings
//! once each queue has an entry registered. The kernel tears the entries
//! down at unmount, which ends the threads.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use fsapi::{Errno, FileSystem};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::direct::Direct;
use crate::wire::{self, InHeader, OpCounts, IN_HEADER_BYTES, OUT_HEADER_BYTES};

/// Where the kernel says whether the transport may be used.
pub(crate) const ENABLE_PARAMETER: &str = "/sys/module/fuse/parameters/enable_uring";

/// The largest write the kernel may send (and the mount's `max_write`):
/// each entry's payload buffer holds one.
pub(crate) const MAX_WRITE: u32 = 1 << 20;

/// Ring entries per queue: requests the kernel can hand a queue's thread
/// before it answers the first (the writeback cache's background writes
/// beside a program's own calls).
const ENTRIES_PER_QUEUE: usize = 4;

/// `fuse_uring_cmd`'s commands (the SQE's `cmd_op`).
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;

/// `struct fuse_uring_req_header`: the request or reply header (128
/// bytes), the operation's fixed argument (128), and
/// `struct fuse_uring_ent_in_out` (32: flags, commit_id, payload_sz).
const HEADERS_BYTES: usize = 288;
const OP_IN_AT: usize = 128;
const COMMIT_ID_AT: usize = 264;
const PAYLOAD_SIZE_AT: usize = 272;

/// How long a queue waits for the kernel to finish INIT before giving up
/// its registration (the kernel then serves through /dev/fuse).
const REGISTER_TRIES: u32 = 5000;

/// Whether the running kernel lets FUSE servers use io_uring.
pub(crate) fn enabled() -> bool {
    std::fs::read_to_string(ENABLE_PARAMETER).is_ok_and(|v| v.trim() == "Y")
}

/// How many queues the kernel makes: one per possible CPU.
pub(crate) fn queue_count() -> usize {
    let from_sysfs = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok().and_then(|text| {
        let last = text.trim().rsplit([',', '-']).next()?;
        last.parse::<usize>().ok().map(|n| n + 1)
    });
    // SAFETY: sysconf has no preconditions.
    from_sysfs.unwrap_or_else(|| unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize)
}

/// What INIT decided, told to the queue threads waiting to register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Waiting,
    Go,
    Stay,
}

/// The meeting point between INIT (in the `fuser` session) and the queue
/// threads: they register only once INIT has asked for io_uring.
#[derive(Debug)]
pub(crate) struct Start {
    decision: Mutex<Decision>,
    decided: Condvar,
    /// What INIT agreed to, set before the decision.
    agreed: Mutex<wire::Agreed>,
}

impl Start {
    pub fn new() -> Arc<Start> {
        let agreed = Mutex::new(wire::Agreed::default());
        Arc::new(Start { decision: Mutex::new(Decision::Waiting), decided: Condvar::new(), agreed })
    }

    /// INIT agreed to `agreed` (before it decides).
    pub fn agree(&self, agreed: wire::Agreed) {
        *self.agreed.lock().unwrap_or_else(|e| e.into_inner()) = agreed;
    }

    fn agreed(&self) -> wire::Agreed {
        *self.agreed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// INIT asked for io_uring (`go`) or the kernel did not offer it; an
    /// ended session says `false` too, so no thread waits forever.
    pub fn decide(&self, go: bool) {
        let mut d = self.decision.lock().unwrap_or_else(|e| e.into_inner());
        if *d == Decision::Waiting {
            *d = if go { Decision::Go } else { Decision::Stay };
            self.decided.notify_all();
        }
    }

    fn wait(&self) -> bool {
        let mut d = self.decision.lock().unwrap_or_else(|e| e.into_inner());
        while *d == Decision::Waiting {
            d = self.decided.wait(d).unwrap_or_else(|e| e.into_inner());
        }
        *d == Decision::Go
    }
}

/// What the queue threads did, for the mount's report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RingReport {
    /// Queues whose entries the kernel took.
    pub queues: usize,
    /// Requests answered through the rings.
    pub requests: u64,
    /// Why a queue could not register (the kernel then served through
    /// /dev/fuse), if one could not.
    pub refused: Option<String>,
}

/// The queue threads of one mount.
pub(crate) struct Rings {
    threads: Vec<std::thread::JoinHandle<Result<bool, String>>>,
    requests: Arc<AtomicU64>,
}

impl Rings {
    /// Starts a thread per queue on `fuse` (a descriptor of the session's
    /// /dev/fuse); each waits for `start`.
    pub fn spawn(
        fs: Arc<dyn FileSystem>,
        fuse: OwnedFd,
        start: Arc<Start>,
        counts: Arc<OpCounts>,
        direct: Arc<Direct>,
    ) -> std::io::Result<Rings> {
        let fuse = Arc::new(fuse);
        let requests = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for qid in 0..queue_count() {
            let (fs, fuse, start, requests, counts, direct) = (
                Arc::clone(&fs),
                Arc::clone(&fuse),
                Arc::clone(&start),
                Arc::clone(&requests),
                Arc::clone(&counts),
                Arc::clone(&direct),
            );
            let thread = std::thread::Builder::new().name(format!("fuse-ring-{qid}")).spawn(move || {
                if !start.wait() {
                    return Ok(false);
                }
                pin_to_cpu(qid);
                let mut queue = Queue::new(qid as u16, fuse.as_raw_fd()).map_err(|e| e.to_string())?;
                queue.agreed = start.agreed();
                queue.serve(&*fs, &direct, &requests, &counts)?;
                Ok(true)
            })?;
            threads.push(thread);
        }
        Ok(Rings { threads, requests })
    }

    /// Waits for every queue thread (they end when the kernel tears the
    /// entries down at unmount).
    pub fn join(self) -> RingReport {
        let mut report = RingReport::default();
        for thread in self.threads {
            match thread.join() {
                Ok(Ok(true)) => report.queues += 1,
                Ok(Ok(false)) => {}
                Ok(Err(why)) => report.refused = report.refused.or(Some(why)),
                Err(_) => report.refused = report.refused.or(Some("a queue thread panicked".into())),
            }
        }
        report.requests = self.requests.load(Ordering::Relaxed);
        report
    }
}

/// Runs the calling thread on `cpu` only, when it may (a CPU outside the
/// process's cgroup leaves the thread where it was: it still serves).
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes in
    // bounds for cpu < CPU_SETSIZE, which is checked.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Where an entry is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// REGISTER sent; no request yet.
    Registering,
    /// COMMIT_AND_FETCH sent, or registered: waiting for a request.
    Waiting,
    /// Torn down by the kernel (unmount) or failed.
    Gone,
}

/// One ring entry's buffers, which the kernel reads and writes between a
/// submission and its completion: held as raw allocations, touched only
/// between a completion and the next submission.
struct Entry {
    headers: *mut u8,
    payload: *mut u8,
    payload_bytes: usize,
    /// The iovec pair REGISTER points to.
    iov: *mut [libc::iovec; 2],
    state: State,
    tries: u32,
}

impl Entry {
    fn new(payload_bytes: usize) -> Entry {
        let headers = Box::into_raw(vec![0u8; HEADERS_BYTES].into_boxed_slice()) as *mut u8;
        let payload = Box::into_raw(vec![0u8; payload_bytes].into_boxed_slice()) as *mut u8;
        let iov = Box::into_raw(Box::new([
            libc::iovec { iov_base: headers.cast(), iov_len: HEADERS_BYTES },
            libc::iovec { iov_base: payload.cast(), iov_len: payload_bytes },
        ]));
        Entry { headers, payload, payload_bytes, iov, state: State::Registering, tries: 0 }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: each pointer came from Box::into_raw with these lengths,
        // and the ring that could still write them is dropped first
        // (Queue's field order).
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.headers, HEADERS_BYTES)));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.payload, self.payload_bytes)));
            drop(Box::from_raw(self.iov));
        }
    }
}

/// One queue: its ring, its entries, the thread's reply buffer.
struct Queue {
    // Dropped before `entries`: closing the ring cancels what the kernel
    // still holds of them.
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    entries: Vec<Entry>,
    qid: u16,
    fuse: i32,
    reply: Vec<u8>,
    /// What INIT agreed to, known once `Start` is decided.
    agreed: wire::Agreed,
}

/// `IORING_OP_URING_CMD` on /dev/fuse with `struct fuse_uring_cmd_req`.
fn command(
    fuse: i32,
    op: u32,
    qid: u16,
    commit_id: u64,
    iov: Option<*mut [libc::iovec; 2]>,
) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    let mut sqe = opcode::UringCmd80::new(types::Fd(fuse), op).cmd(cmd);
    if let Some(iov) = iov {
        sqe = sqe.addr(Some(iov as u64));
    }
    let entry = sqe.build();
    if iov.is_none() {
        return entry;
    }
    // REGISTER also needs the iovec count in the SQE's `len` (offset 24),
    // which io-uring's UringCmd80 does not set.
    const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
    // SAFETY: Entry128 is repr(C), exactly the kernel's 128-byte SQE.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(entry) };
    raw[24..28].copy_from_slice(&2u32.to_ne_bytes());
    // SAFETY: as above; any bytes are a valid SQE to this type.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

impl Queue {
    fn new(qid: u16, fuse: i32) -> std::io::Result<Queue> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build((2 * ENTRIES_PER_QUEUE) as u32)?;
        let entries = (0..ENTRIES_PER_QUEUE).map(|_| Entry::new(MAX_WRITE as usize)).collect();
        Ok(Queue { ring, entries, qid, fuse, reply: Vec::new(), agreed: wire::Agreed::default() })
    }

    fn push(&mut self, sqe: squeue::Entry128, index: usize) {
        let sqe = sqe.user_data(index as u64);
        // SAFETY: the buffers the command names live in `self.entries`
        // until the ring is dropped; the queue has room for an entry each
        // (twice ENTRIES_PER_QUEUE, one command in flight per entry).
        unsafe {
            if self.ring.submission().push(&sqe).is_err() {
                self.ring.submit().ok();
                self.ring.submission().push(&sqe).ok();
            }
        }
    }

    fn register(&mut self, index: usize) {
        let iov = self.entries[index].iov;
        self.entries[index].state = State::Registering;
        self.push(command(self.fuse, CMD_REGISTER, self.qid, 0, Some(iov)), index);
    }

    /// Registers every entry, then answers requests until the kernel tears
    /// the entries down. An error: a registration the kernel refused.
    fn serve(
        &mut self,
        fs: &dyn FileSystem,
        direct: &Direct,
        requests: &AtomicU64,
        counts: &OpCounts,
    ) -> Result<(), String> {
        for index in 0..self.entries.len() {
            self.register(index);
        }
        let mut done = Vec::new();
        while self.entries.iter().any(|e| e.state != State::Gone) {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(format!("io_uring_enter: {e}")),
            }
            done.clear();
            done.extend(self.ring.completion().map(|c| (c.user_data() as usize, c.result())));
            for &(index, result) in &done {
                self.completed(fs, direct, requests, counts, index, result)?;
            }
        }
        Ok(())
    }

    fn completed(
        &mut self,
        fs: &dyn FileSystem,
        direct: &Direct,
        requests: &AtomicU64,
        counts: &OpCounts,
        index: usize,
        result: i32,
    ) -> Result<(), String> {
        let Some(entry) = self.entries.get_mut(index) else {
            return Ok(());
        };
        if result == 0 {
            entry.state = State::Waiting;
            requests.fetch_add(1, Ordering::Relaxed);
            let commit_id = self.answer(fs, direct, counts, index);
            self.push(command(self.fuse, CMD_COMMIT_AND_FETCH, self.qid, commit_id, None), index);
            return Ok(());
        }
        let errno = -result;
        if entry.state == State::Registering && errno == libc::EAGAIN && entry.tries < REGISTER_TRIES {
            // INIT's reply is not processed yet.
            entry.tries += 1;
            std::thread::sleep(Duration::from_millis(1));
            self.register(index);
            return Ok(());
        }
        let registering = entry.state == State::Registering;
        entry.state = State::Gone;
        let torn_down = [libc::ENOTCONN, libc::ECANCELED, libc::ENODEV, libc::ECONNABORTED].contains(&errno);
        if registering && !torn_down {
            return Err(format!(
                "the kernel refused queue {}'s registration: {}",
                self.qid,
                std::io::Error::from_raw_os_error(errno)
            ));
        }
        Ok(())
    }

    /// Answers the request in entry `index` in place; returns its commit id.
    fn answer(&mut self, fs: &dyn FileSystem, direct: &Direct, counts: &OpCounts, index: usize) -> u64 {
        let entry = &self.entries[index];
        // SAFETY: the kernel completed this entry's command and touches
        // its buffers again only after the next submission.
        let headers = unsafe { std::slice::from_raw_parts_mut(entry.headers, HEADERS_BYTES) };
        let payload = unsafe { std::slice::from_raw_parts_mut(entry.payload, entry.payload_bytes) };
        let commit_id =
            u64::from_ne_bytes(headers[COMMIT_ID_AT..COMMIT_ID_AT + 8].try_into().expect("8 bytes"));
        let size =
            u32::from_ne_bytes(headers[PAYLOAD_SIZE_AT..PAYLOAD_SIZE_AT + 4].try_into().expect("4 bytes"));
        let given = &payload[..(size as usize).min(payload.len())];
        // A header too short to parse is answered EINVAL under the commit
        // id (the kernel's copy of `unique`).
        let (unique, sent) = match InHeader::parse(&headers[..IN_HEADER_BYTES]) {
            Some(h) => {
                counts.add(h.opcode);
                let op_in = &headers[OP_IN_AT..OP_IN_AT + 128];
                let answered = wire::answer_with(fs, direct, &h, op_in, given, &mut self.reply, self.agreed);
                let sent = match answered {
                    Ok(()) if self.reply.len() <= payload.len() => {
                        payload[..self.reply.len()].copy_from_slice(&self.reply);
                        Ok(self.reply.len())
                    }
                    Ok(()) => Err(Errno::IO),
                    Err(e) => Err(e),
                };
                (h.unique, sent)
            }
            None => (commit_id, Err(Errno::INVAL)),
        };
        let bytes = *sent.as_ref().unwrap_or(&0);
        headers[..OUT_HEADER_BYTES].copy_from_slice(&wire::out_header(unique, sent));
        headers[PAYLOAD_SIZE_AT..PAYLOAD_SIZE_AT + 4].copy_from_slice(&(bytes as u32).to_ne_bytes());
        commit_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_register_command_carries_its_iovecs_its_count_and_its_queue() {
        let entry = Entry::new(4096);
        let sqe = command(7, CMD_REGISTER, 3, 0, Some(entry.iov));
        // SAFETY: Entry128 is the kernel's 128-byte SQE.
        let raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
        assert_eq!(raw[0], 46, "IORING_OP_URING_CMD");
        assert_eq!(i32::from_ne_bytes(raw[4..8].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(raw[8..12].try_into().unwrap()), CMD_REGISTER);
        assert_eq!(u64::from_ne_bytes(raw[16..24].try_into().unwrap()), entry.iov as u64);
        assert_eq!(u32::from_ne_bytes(raw[24..28].try_into().unwrap()), 2);
        assert_eq!(u16::from_ne_bytes(raw[48 + 16..48 + 18].try_into().unwrap()), 3);
    }

    #[test]
    fn a_commit_names_the_request_it_answers() {
        let sqe = command(7, CMD_COMMIT_AND_FETCH, 1, 0xfeed, None);
        // SAFETY: as above.
        let raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
        assert_eq!(u32::from_ne_bytes(raw[8..12].try_into().unwrap()), CMD_COMMIT_AND_FETCH);
        assert_eq!(u64::from_ne_bytes(raw[48 + 8..48 + 16].try_into().unwrap()), 0xfeed);
        assert_eq!(u32::from_ne_bytes(raw[24..28].try_into().unwrap()), 0);
    }

    #[test]
    fn a_session_that_ends_before_init_releases_the_waiting_queues() {
        let start = Start::new();
        let waiter = {
            let start = Arc::clone(&start);
            std::thread::spawn(move || start.wait())
        };
        start.decide(false);
        start.decide(true);
        assert!(!waiter.join().unwrap(), "the first decision stands");
    }
}
