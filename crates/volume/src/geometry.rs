//! Address mapping: where a byte range of a plex lives on its subdisks.
//!
//! Pure arithmetic over plex organisations (concat, striped, RAID-5 with
//! left-asymmetric or left-symmetric parity). Stripe sizes are any
//! multiple of 512 bytes, powers of two or not. This module does no I/O
//! and holds no state.

use std::ops::Range;

/// Where RAID-5 puts parity and data within a stripe row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParityLayout {
    /// Vinum's layout: parity on subdisk `n-1 - (row mod n)`, data chunks
    /// in subdisk order skipping the parity subdisk.
    LeftAsymmetric,
    /// Linux md's default: parity as above, data starting on the subdisk
    /// after the parity subdisk and wrapping around.
    LeftSymmetric,
}

/// A plex organisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Org {
    Concat,
    Striped { stripe_bytes: u64 },
    Raid5 { stripe_bytes: u64, layout: ParityLayout },
}

impl Org {
    pub fn kind(&self) -> &'static str {
        match self {
            Org::Concat => "concat",
            Org::Striped { .. } => "striped",
            Org::Raid5 { .. } => "raid5",
        }
    }

    pub fn stripe_bytes(&self) -> Option<u64> {
        match self {
            Org::Concat => None,
            Org::Striped { stripe_bytes } | Org::Raid5 { stripe_bytes, .. } => Some(*stripe_bytes),
        }
    }

    /// The fewest subdisks the organisation works with.
    pub fn subdisks_min(&self) -> usize {
        match self {
            Org::Concat => 1,
            Org::Striped { .. } => 2,
            Org::Raid5 { .. } => 3,
        }
    }

    /// Usable plex size for subdisks of these lengths: a striped or RAID-5
    /// plex uses only whole stripe rows of its (equal) subdisks.
    pub fn plex_bytes(&self, sd_lengths_bytes: &[u64]) -> u64 {
        let n = sd_lengths_bytes.len() as u64;
        let shortest = sd_lengths_bytes.iter().copied().min().unwrap_or(0);
        match self {
            Org::Concat => sd_lengths_bytes.iter().sum(),
            Org::Striped { stripe_bytes } => shortest / stripe_bytes * stripe_bytes * n,
            Org::Raid5 { stripe_bytes, .. } => shortest / stripe_bytes * stripe_bytes * n.saturating_sub(1),
        }
    }
}

/// One contiguous piece of a request on one subdisk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Index of the subdisk in plex order.
    pub sd: usize,
    /// Byte offset inside the subdisk.
    pub sd_offset_bytes: u64,
    /// Byte offset inside the request buffer.
    pub buf_offset_bytes: u64,
    pub len_bytes: u64,
}

/// Splits `offset..offset+len` of a concatenated plex whose subdisks have
/// `sd_lengths_bytes` (in plex order). Bytes past the plex are not mapped.
pub fn map_concat(sd_lengths_bytes: &[u64], offset: u64, len: u64) -> Vec<Extent> {
    let mut extents = Vec::new();
    let mut sd_start = 0;
    let end = offset + len;
    for (sd, &sd_len) in sd_lengths_bytes.iter().enumerate() {
        let sd_end = sd_start + sd_len;
        let (from, to) = (offset.max(sd_start), end.min(sd_end));
        if from < to {
            extents.push(Extent {
                sd,
                sd_offset_bytes: from - sd_start,
                buf_offset_bytes: from - offset,
                len_bytes: to - from,
            });
        }
        sd_start = sd_end;
    }
    extents
}

/// Splits a range of a striped plex of `width` subdisks into stripe-unit
/// pieces, in address order.
pub fn map_striped(stripe_bytes: u64, width: usize, offset: u64, len: u64) -> Vec<Extent> {
    let width = width as u64;
    let mut extents = Vec::new();
    let mut pos = offset;
    while pos < offset + len {
        let unit = pos / stripe_bytes;
        let within = pos % stripe_bytes;
        let piece = (stripe_bytes - within).min(offset + len - pos);
        extents.push(Extent {
            sd: (unit % width) as usize,
            sd_offset_bytes: (unit / width) * stripe_bytes + within,
            buf_offset_bytes: pos - offset,
            len_bytes: piece,
        });
        pos += piece;
    }
    extents
}

/// RAID-5 geometry of one plex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raid5 {
    pub stripe_bytes: u64,
    /// Number of subdisks, parity included.
    pub disks: usize,
    pub layout: ParityLayout,
}

/// The data of one stripe row touched by a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSpan {
    pub row: u64,
    /// For each data column (0..disks-1): the byte range inside the chunk
    /// that the request touches, if any.
    pub columns: Vec<Option<Range<u64>>>,
    /// Offset of the row's first touched byte inside the request buffer.
    pub buf_offset_bytes: u64,
}

impl Raid5 {
    /// Data bytes in one stripe row.
    pub fn row_data_bytes(&self) -> u64 {
        self.stripe_bytes * (self.disks as u64 - 1)
    }

    /// The subdisk holding parity for `row`.
    pub fn parity_disk(&self, row: u64) -> usize {
        let n = self.disks as u64;
        (n - 1 - row % n) as usize
    }

    /// The subdisk holding data column `column` (0-based) of `row`.
    pub fn data_disk(&self, row: u64, column: usize) -> usize {
        let parity = self.parity_disk(row);
        match self.layout {
            ParityLayout::LeftAsymmetric if column < parity => column,
            ParityLayout::LeftAsymmetric => column + 1,
            ParityLayout::LeftSymmetric => (parity + 1 + column) % self.disks,
        }
    }

    /// Where plex byte `offset` lives: (subdisk, byte offset in subdisk).
    pub fn locate(&self, offset: u64) -> (usize, u64) {
        let row = offset / self.row_data_bytes();
        let within = offset % self.row_data_bytes();
        let column = (within / self.stripe_bytes) as usize;
        (self.data_disk(row, column), row * self.stripe_bytes + within % self.stripe_bytes)
    }

    /// Splits a plex range into the stripe rows it touches.
    pub fn rows(&self, offset: u64, len: u64) -> Vec<RowSpan> {
        let row_bytes = self.row_data_bytes();
        let mut spans: Vec<RowSpan> = Vec::new();
        let mut pos = offset;
        while pos < offset + len {
            let row = pos / row_bytes;
            let within = pos % row_bytes;
            let column = (within / self.stripe_bytes) as usize;
            let in_chunk = within % self.stripe_bytes;
            let piece = (self.stripe_bytes - in_chunk).min(offset + len - pos);
            if spans.last().is_none_or(|s| s.row != row) {
                let columns = vec![None; self.disks - 1];
                spans.push(RowSpan { row, columns, buf_offset_bytes: pos - offset });
            }
            let span = spans.last_mut().expect("a span for this row was pushed just above");
            span.columns[column] = Some(in_chunk..in_chunk + piece);
            pos += piece;
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn concat_splits_at_subdisk_ends() {
        let got = map_concat(&[10 * K, 20 * K], 8 * K, 4 * K);
        let want = vec![
            Extent { sd: 0, sd_offset_bytes: 8 * K, buf_offset_bytes: 0, len_bytes: 2 * K },
            Extent { sd: 1, sd_offset_bytes: 0, buf_offset_bytes: 2 * K, len_bytes: 2 * K },
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn striped_279k_maps_to_hand_computed_places() {
        // Unit u = offset / 279k lives on subdisk u % 3 at row u / 3.
        // Offset 1000k: unit 3 (837k..1116k), 163k into it -> sd 0, row 1.
        let got = map_striped(279 * K, 3, 1000 * K, 200 * K);
        let want = vec![
            Extent { sd: 0, sd_offset_bytes: 279 * K + 163 * K, buf_offset_bytes: 0, len_bytes: 116 * K },
            Extent { sd: 1, sd_offset_bytes: 279 * K, buf_offset_bytes: 116 * K, len_bytes: 84 * K },
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn striped_986_sectors_wraps_rows() {
        let stripe = 986 * 512;
        let got = map_striped(stripe, 2, 3 * stripe - 512, 1024);
        assert_eq!(
            got[0],
            Extent { sd: 0, sd_offset_bytes: 2 * stripe - 512, buf_offset_bytes: 0, len_bytes: 512 }
        );
        assert_eq!(got[1], Extent { sd: 1, sd_offset_bytes: stripe, buf_offset_bytes: 512, len_bytes: 512 });
    }

    fn raid(layout: ParityLayout) -> Raid5 {
        Raid5 { stripe_bytes: 279 * K, disks: 4, layout }
    }

    #[test]
    fn left_asymmetric_parity_and_data_order() {
        let r = raid(ParityLayout::LeftAsymmetric);
        // row: parity disk, data disks in column order
        let table =
            [(0, 3, [0, 1, 2]), (1, 2, [0, 1, 3]), (2, 1, [0, 2, 3]), (3, 0, [1, 2, 3]), (4, 3, [0, 1, 2])];
        for (row, parity, data) in table {
            assert_eq!(r.parity_disk(row), parity, "row {row}");
            let got: Vec<usize> = (0..3).map(|c| r.data_disk(row, c)).collect();
            assert_eq!(got, data, "row {row}");
        }
    }

    #[test]
    fn left_symmetric_parity_and_data_order() {
        let r = raid(ParityLayout::LeftSymmetric);
        let table = [(0, 3, [0, 1, 2]), (1, 2, [3, 0, 1]), (2, 1, [2, 3, 0]), (3, 0, [1, 2, 3])];
        for (row, parity, data) in table {
            assert_eq!(r.parity_disk(row), parity, "row {row}");
            let got: Vec<usize> = (0..3).map(|c| r.data_disk(row, c)).collect();
            assert_eq!(got, data, "row {row}");
        }
    }

    #[test]
    fn raid5_locate_279k_both_layouts() {
        // Row data = 3 * 279k = 837k. Offset 1000k: row 1, 163k in: column 0, 163k into the chunk.
        let la = raid(ParityLayout::LeftAsymmetric);
        assert_eq!(la.locate(1000 * K), (0, 279 * K + 163 * K));
        let ls = raid(ParityLayout::LeftSymmetric);
        assert_eq!(ls.locate(1000 * K), (3, 279 * K + 163 * K));
        // Offset 2000k: row 2 (1674k..2511k), 326k in: column 1, 47k in.
        assert_eq!(la.locate(2000 * K), (2, 2 * 279 * K + 47 * K));
        assert_eq!(ls.locate(2000 * K), (3, 2 * 279 * K + 47 * K));
    }

    #[test]
    fn raid5_rows_split_request() {
        let r = Raid5 { stripe_bytes: 4 * K, disks: 3, layout: ParityLayout::LeftAsymmetric };
        let spans = r.rows(6 * K, 6 * K);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].columns, vec![None, Some(2 * K..4 * K)]);
        assert_eq!(spans[1].columns, vec![Some(0..4 * K), None]);
        assert_eq!(spans[1].buf_offset_bytes, 2 * K);
    }

    #[test]
    fn plex_sizes_use_whole_rows() {
        assert_eq!(Org::Striped { stripe_bytes: 3 * K }.plex_bytes(&[10 * K, 10 * K]), 18 * K);
        let r5 = Org::Raid5 { stripe_bytes: 3 * K, layout: ParityLayout::LeftAsymmetric };
        assert_eq!(r5.plex_bytes(&[10 * K; 4]), 27 * K);
    }
}
