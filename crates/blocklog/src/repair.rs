//! Repair of a log whose replay stopped at damage: the commits from the
//! damage on are dropped, and a clean header starts the log a whole area
//! past its tail, where no record it ever held can be taken for a current
//! one (every record's LSN lies within an area of the tail it was written
//! under, and the tail never goes back).

use device::Device;

use crate::core::write_slot;
use crate::format::{Header, FLAG_STRIPE, MAX_COUNT};
use crate::read::{newest_header, Found, Reader};
use crate::replay::ReplayStop;
use crate::LogError;

/// What a repair dropped, and the header it wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repaired {
    /// Where replay had stopped, and the commits it did not replay: these
    /// are dropped.
    pub stop: ReplayStop,
    /// The records still readable among the dropped commits.
    pub found: Found,
    pub header: Header,
}

/// Repairs the log on `log` if its header says replay stopped at damage;
/// `None` when it does not (nothing to repair). Writes one header, then
/// flushes. The data is left as the replay that stopped left it: every
/// commit before the damage, none after.
pub fn repair(log: &dyn Device) -> Result<Option<Repaired>, LogError> {
    let Some(header) = newest_header(log)? else {
        return Err(LogError::NoLog { device: log.name().to_string() });
    };
    let Some(stop) = header.stop else { return Ok(None) };
    let reader = Reader::new(log, &header, home_sectors(&header));
    let found = reader.scan(header.tail, reader.limit(), stop.commit)?;
    let restart = header.tail + header.area_bytes();
    if restart >= MAX_COUNT {
        return Err(LogError::Layout {
            device: log.name().to_string(),
            problem: format!("the log's LSNs are spent (tail {}); format it anew", header.tail),
        });
    }
    let next = Header {
        generation: header.generation + 1,
        tail: restart,
        head: restart,
        // Past every number the dropped commits used.
        commits: header.commits.max(stop.last_commit),
        stop: None,
        ..header
    };
    write_slot(log, next.slot(), &next.encode())?;
    log.flush()?;
    let stop = crate::replay::stop_report(&header, &stop);
    Ok(Some(Repaired { stop, found, header: next }))
}

/// The homes' sizes in sectors, as far as the header knows them: a
/// device's log protects its data bytes; a stripe log's drives are not
/// known here, so their entries are bounded by the sector numbers alone.
fn home_sectors(header: &Header) -> Vec<u64> {
    if header.flags & FLAG_STRIPE != 0 {
        return vec![MAX_COUNT; header.data_bytes as usize];
    }
    vec![header.data_bytes / u64::from(header.sector_bytes)]
}
