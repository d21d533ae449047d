//! What a simulated disk holds: the bytes written (as 4 KiB pages, sparse),
//! and apart from them the bytes durable (what a power cut would leave).
//! A page becomes durable when the model says the write that last changed
//! it is on the medium. The two share a page until it is written again
//! (copy on write), so a disk whose writes are all durable holds one copy.

use rustc_hash::FxHashMap;

pub(crate) const PAGE: u64 = 4096;

/// At most this much written data held, so a long modeled run cannot eat
/// the machine's memory; `data=discard` keeps none.
pub(crate) const HELD_BYTES_MAX: u64 = 4 << 30;

type Page = std::sync::Arc<[u8; PAGE as usize]>;

#[derive(Default)]
pub(crate) struct Store {
    current: FxHashMap<u64, Page>,
    durable: FxHashMap<u64, Page>,
    keep: bool,
    /// Distinct pages held.
    pages: u64,
}

impl Store {
    pub fn new(keep: bool) -> Store {
        Store { keep, ..Store::default() }
    }

    /// Whether written data is kept.
    pub fn keeps(&self) -> bool {
        self.keep
    }

    /// Bytes held, both copies (a page they share once).
    pub fn held_bytes(&self) -> u64 {
        self.pages * PAGE
    }

    /// Stores `data` at `offset`; an error when the store is full.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        if !self.keep {
            return Ok(());
        }
        if self.held_bytes() + data.len() as u64 + PAGE > HELD_BYTES_MAX {
            return Err(format!(
                "holds {} MiB of written data, the most a simulated disk keeps; give data=discard to model timing only",
                self.held_bytes() >> 20
            ));
        }
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (page, within) = (at / PAGE, (at % PAGE) as usize);
            let n = (PAGE as usize - within).min(data.len() - done);
            let p = self.current.entry(page).or_insert_with(|| {
                self.pages += 1;
                Page::new([0u8; PAGE as usize])
            });
            if Page::strong_count(p) > 1 {
                self.pages += 1; // the durable copy keeps the old page
            }
            Page::make_mut(p)[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    fn read_from(pages: &FxHashMap<u64, Page>, offset: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let (page, within) = (at / PAGE, (at % PAGE) as usize);
            let n = (PAGE as usize - within).min(buf.len() - done);
            match pages.get(&page) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// What a read sees now.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        Store::read_from(&self.current, offset, buf);
    }

    /// What a power cut would leave there.
    pub fn read_durable(&self, offset: u64, buf: &mut [u8]) {
        Store::read_from(&self.durable, offset, buf);
    }

    /// The pages of `offset..offset + len` are on the medium as they are now.
    pub fn make_durable(&mut self, offset: u64, len: u64) {
        if !self.keep || len == 0 {
            return;
        }
        for page in offset / PAGE..=(offset + len - 1) / PAGE {
            if let Some(p) = self.current.get(&page) {
                let old = self.durable.insert(page, Page::clone(p));
                if old.is_some_and(|old| Page::strong_count(&old) == 1) {
                    self.pages -= 1;
                }
            }
        }
    }

    /// The durable pages, for an image of the disk after a power cut.
    pub fn durable_pages(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.durable.iter().map(|(page, p)| (page * PAGE, &p[..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_read_back_but_durable_only_once_made_so() {
        let mut s = Store::new(true);
        s.write(512, &[7u8; 1024]).unwrap();
        let mut buf = [0u8; 1024];
        s.read(512, &mut buf);
        assert_eq!(buf, [7u8; 1024]);
        s.read_durable(512, &mut buf);
        assert_eq!(buf, [0u8; 1024]);
        s.make_durable(0, 4096);
        s.read_durable(512, &mut buf);
        assert_eq!(buf, [7u8; 1024]);
    }

    #[test]
    fn a_durable_page_is_shared_until_written_again() {
        let mut s = Store::new(true);
        s.write(0, &[1u8; 4096]).unwrap();
        s.make_durable(0, 4096);
        assert_eq!(s.held_bytes(), 4096);
        s.write(0, &[2u8; 4096]).unwrap();
        assert_eq!(s.held_bytes(), 8192);
        let mut buf = [0u8; 4096];
        s.read_durable(0, &mut buf);
        assert_eq!(buf, [1u8; 4096]);
        s.make_durable(0, 4096);
        assert_eq!(s.held_bytes(), 4096);
    }

    #[test]
    fn discard_keeps_nothing() {
        let mut s = Store::new(false);
        s.write(0, &[1u8; 4096]).unwrap();
        let mut buf = [9u8; 16];
        s.read(0, &mut buf);
        assert_eq!((buf, s.held_bytes()), ([0u8; 16], 0));
    }
}
