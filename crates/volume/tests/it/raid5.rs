use std::sync::{Arc, Barrier};

use device::{Device, Fault, FaultyDevice, Op};
use volume::{State, DATA_START_BYTES};

use crate::common::*;

fn raid5(
    count: usize,
    stripe: &str,
) -> (std::collections::HashMap<String, Arc<dyn Device>>, Arc<volume::Volume>) {
    let drives = drives_for(count, 2 * MIB);
    let v = open(&single_plex(&format!("raid5 {stripe}"), count, "1m"), &drives);
    (drives, v)
}

#[test]
fn small_write_costs_two_reads_two_writes() {
    let (_drives, v) = raid5(4, "64k");
    v.write_at(&[5; 4096], 8192).unwrap();
    let t = drive_totals(&v);
    assert_eq!((t.reads, t.writes), (2, 2));
}

#[test]
fn full_stripe_write_costs_no_reads() {
    let (_drives, v) = raid5(4, "64k");
    v.write_at(&pattern(3 * 64 * 1024, 1), 0).unwrap();
    let t = drive_totals(&v);
    assert_eq!((t.reads, t.writes), (0, 4));
}

#[test]
fn three_drive_small_write_uses_reconstruct_write() {
    // Reconstruct-write reads only the other data chunk: 1 read instead of 2.
    let (_drives, v) = raid5(3, "64k");
    v.write_at(&[5; 4096], 0).unwrap();
    let t = drive_totals(&v);
    assert_eq!((t.reads, t.writes), (1, 2));
}

#[test]
fn write_lands_on_left_asymmetric_parity_disk() {
    // Row 0 of 4 drives: parity on d3, so a write to column 0 updates d0 and d3.
    let (drives, v) = raid5(4, "64k");
    v.write_at(&[9; 4096], 0).unwrap();
    let mut parity = vec![0; 4096];
    drives["d3"].read_at(&mut parity, DATA_START_BYTES).unwrap();
    assert_eq!(parity, vec![9; 4096]);
}

#[test]
fn left_symmetric_row_one_data_starts_after_parity() {
    let drives = drives_for(4, 2 * MIB);
    let v = open(&single_plex("raid5 64k layout ls", 4, "1m"), &drives);
    // Row 1: parity on d2, column 0 on d3.
    v.write_at(&[4; 4096], 3 * 64 * KIB).unwrap();
    let mut data = vec![0; 4096];
    drives["d3"].read_at(&mut data, DATA_START_BYTES + 64 * KIB).unwrap();
    assert_eq!(data, vec![4; 4096]);
}

#[test]
fn degraded_read_reconstructs_and_counts() {
    let (_drives, v) = raid5(4, "64k");
    let data = pattern(64 * 1024, 2);
    v.write_at(&data, 0).unwrap();
    v.set_state("d0", State::Down).unwrap();
    let mut back = vec![0; data.len()];
    v.read_at(&mut back, 0).unwrap();
    assert_eq!(back, data);
    assert_eq!(v.report().plexes[0].counters.recovered_reads, 1);
}

#[test]
fn degraded_write_then_read_returns_new_data() {
    let (_drives, v) = raid5(4, "64k");
    v.write_at(&pattern(192 * 1024, 1), 0).unwrap();
    v.set_state("d1", State::Down).unwrap();
    let data = pattern(8192, 77);
    v.write_at(&data, 64 * KIB + 4096).unwrap();
    let mut back = vec![0; 8192];
    v.read_at(&mut back, 64 * KIB + 4096).unwrap();
    assert_eq!(back, data);
    assert_eq!(v.report().plexes[0].counters.degraded_writes, 1);
}

#[test]
fn parityless_write_writes_data_only() {
    let (_drives, v) = raid5(4, "64k");
    v.set_state("d3", State::Down).unwrap();
    v.write_at(&[3; 4096], 0).unwrap();
    let t = drive_totals(&v);
    assert_eq!((t.reads, t.writes), (0, 1));
    assert_eq!(v.report().plexes[0].counters.parityless_writes, 1);
}

#[test]
fn second_failure_is_an_error_not_wrong_data() {
    let (_drives, v) = raid5(4, "64k");
    v.write_at(&pattern(192 * 1024, 1), 0).unwrap();
    v.set_state("d0", State::Down).unwrap();
    v.set_state("d1", State::Down).unwrap();
    let mut back = vec![0; 4096];
    assert!(v.read_at(&mut back, 0).is_err());
    assert!(v.write_at(&[1; 4096], 0).is_err());
}

#[test]
fn read_error_is_recovered_from_parity() {
    let mems = drives_for(4, 2 * MIB);
    let mut drives = mems.clone();
    let range = DATA_START_BYTES..DATA_START_BYTES + MIB;
    let faulty =
        FaultyDevice::new(Arc::clone(&mems["d0"]), vec![Fault::Range { range, reads: true, writes: false }]);
    drives.insert("d0".into(), Arc::new(faulty));
    let v = open(&single_plex("raid5 64k", 4, "1m"), &drives);
    let data = pattern(192 * 1024, 5);
    v.write_at(&data, 0).unwrap();
    let mut back = vec![0; 4096];
    v.read_at(&mut back, 0).unwrap();
    assert_eq!(back, data[..4096]);
    assert_eq!(v.report().plexes[0].counters.recovered_reads, 1);
}

#[test]
fn write_error_marks_subdisk_down_and_data_survives() {
    let mems = drives_for(4, 2 * MIB);
    let mut drives = mems.clone();
    drives.insert(
        "d0".into(),
        Arc::new(FaultyDevice::new(Arc::clone(&mems["d0"]), vec![Fault::Nth { op: Op::Write, n: 2 }])),
    );
    let v = open(&single_plex("raid5 64k", 4, "1m"), &drives);
    v.write_at(&pattern(192 * 1024, 5), 0).unwrap();
    let data = pattern(4096, 6);
    v.write_at(&data, 0).unwrap();
    assert_eq!(v.state("v.p0.s0"), Some(State::Down));
    let mut back = vec![0; 4096];
    v.read_at(&mut back, 0).unwrap();
    assert_eq!(back, data);
}

#[test]
fn check_parity_reports_corrupted_row() {
    let (drives, v) = raid5(4, "64k");
    v.write_at(&pattern(6 * 64 * 1024, 1), 0).unwrap();
    // Flip one byte of row 1's chunk on d0, behind the volume's back.
    drives["d0"].write_at(&[0xff; 512], DATA_START_BYTES + 64 * KIB).unwrap();
    let report = &v.check_parity().unwrap()[0];
    assert_eq!((report.rows_mismatched, report.mismatched_rows.clone()), (1, vec![1]));
}

#[test]
fn rebuild_parity_makes_check_pass() {
    let (drives, v) = raid5(4, "64k");
    v.write_at(&pattern(6 * 64 * 1024, 1), 0).unwrap();
    drives["d3"].write_at(&[0xff; 512], DATA_START_BYTES).unwrap();
    v.rebuild_parity().unwrap();
    assert_eq!(v.check_parity().unwrap()[0].rows_mismatched, 0);
}

#[test]
fn concurrent_writes_to_one_row_keep_parity() {
    let (_drives, v) = raid5(4, "64k");
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (v, start) = (Arc::clone(&v), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for i in 0..50u64 {
                    let offset = ((t * 7 + i * 13) % 48) * 4096;
                    v.write_at(&pattern(4096, t * 1000 + i), offset).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(v.check_parity().unwrap()[0].rows_mismatched, 0);
}

#[test]
fn write_across_rows_counts_units_and_rows() {
    let (_drives, v) = raid5(4, "64k");
    // 160k..288k: data units 2..=4 (2 unit boundaries), rows 0..=1 (1 row boundary).
    v.write_at(&pattern(128 * 1024, 1), 160 * KIB).unwrap();
    let c = v.report().plexes[0].counters;
    assert_eq!((c.writes, c.bytes_written, c.multiblock, c.multistripe), (1, 128 * KIB, 2, 1));
}

#[test]
fn misaligned_request_is_refused() {
    let (_drives, v) = raid5(4, "64k");
    assert!(matches!(v.write_at(&[0; 100], 0), Err(device::DeviceError::Misaligned { .. })));
}

#[test]
fn request_past_end_is_refused() {
    let (_drives, v) = raid5(4, "64k");
    let mut buf = vec![0; 4096];
    assert!(matches!(v.read_at(&mut buf, v.size_bytes()), Err(device::DeviceError::OutOfRange { .. })));
}

#[test]
fn flush_reaches_every_drive() {
    let (drives, v) = raid5(4, "64k");
    v.flush().unwrap();
    assert!(drives.values().all(|d| d.stats().snapshot().flushes == 1));
}

#[test]
fn aligned_only_drives_work_with_odd_stripes() {
    let drives = aligned_drives(4, 2 * MIB);
    let v = open(&single_plex("raid5 7s", 4, "1m"), &drives);
    assert_eq!(v.buffer_align(), 4096);
    let mut data = device::AlignedBuf::zeroed(40 * 1024, 4096);
    data.copy_from_slice(&pattern(40 * 1024, 3));
    v.write_at(&data, 3 * 4096).unwrap();
    let mut back = device::AlignedBuf::zeroed(40 * 1024, 4096);
    v.read_at(&mut back, 3 * 4096).unwrap();
    assert_eq!(&back[..], &data[..]);
}

/// For rows whose data is partly on d0 (3 drives, 8k stripes): the
/// volume offsets of the column on d0 and of the other data column.
fn columns_on_d0(rows: u64) -> Vec<(u64, u64)> {
    let geometry =
        volume::Raid5 { stripe_bytes: 8192, disks: 3, layout: volume::ParityLayout::LeftAsymmetric };
    let row_offset = |row: u64, column: u64| row * 16 * 1024 + column * 8192;
    (0..rows)
        .filter(|&row| geometry.parity_disk(row) != 0)
        .map(|row| {
            let on_d0 = if geometry.data_disk(row, 0) == 0 { 0 } else { 1 };
            (row_offset(row, on_d0), row_offset(row, 1 - on_d0))
        })
        .collect()
}

#[test]
fn degraded_reads_during_writes_to_same_rows_stay_correct() {
    // Writers change the healthy column of each row while readers
    // reconstruct the column on the down drive, which never changes.
    let (_drives, v) = raid5(3, "8k");
    let initial = pattern(v.size_bytes() as usize, 1);
    v.write_at(&initial, 0).unwrap();
    v.set_state("d0", State::Down).unwrap();
    let columns = columns_on_d0(40);
    let writer = {
        let (v, columns) = (Arc::clone(&v), columns.clone());
        std::thread::spawn(move || {
            for (i, &(_, other)) in columns.iter().cycle().take(300).enumerate() {
                v.write_at(&pattern(8192, i as u64), other).unwrap();
            }
        })
    };
    for &(on_d0, _) in columns.iter().cycle().take(300) {
        let mut buf = vec![0; 8192];
        v.read_at(&mut buf, on_d0).unwrap();
        assert_eq!(buf, initial[on_d0 as usize..][..8192]);
    }
    writer.join().unwrap();
    assert_eq!(v.report().plexes[0].counters.recovered_reads, 300);
}
