//! The end-to-end story at library level: the seed's RAID-5 (4
//! drives, 512k stripes) from a configuration file.

use device::Device;
use volume::{assemble, create, parse, State};

use crate::common::*;

const SEED: &str = "drive d0 device /dev/da1s1h\ndrive d1 device /dev/da2s1h\n\
                    drive d2 device /dev/da3s1h\ndrive d3 device /dev/da4s1h\n\
                    volume raid\n  plex org raid5 512k\n    sd length 1m drive d0\n    sd length 1m drive d1\n\
                    sd length 1m drive d2\n    sd length 1m drive d3\n";

#[test]
fn seed_raid5_survives_drive_loss_and_revive() {
    let drives = drives_for(4, 2 * MIB);
    let set = create(&parse(SEED).unwrap(), &drives, &fresh).unwrap();
    let v = set.volume("raid").unwrap();
    assert_eq!(v.size_bytes(), 3 * MIB);
    let data = pattern(v.size_bytes() as usize, 11);
    v.write_at(&data, 0).unwrap();
    set.set_state("d2", State::Down).unwrap();
    let mut back = vec![0; data.len()];
    v.read_at(&mut back, 0).unwrap();
    assert_eq!(back, data);
    set.revive("d2").unwrap();
    assert_eq!(v.check_parity().unwrap()[0].rows_mismatched, 0);
    let devs: Vec<_> = (0..4).map(|i| std::sync::Arc::clone(&drives[&format!("d{i}")])).collect();
    let again = assemble(&devs).unwrap();
    assert_eq!(again.volume("raid").unwrap().state("raid.p0.s2"), Some(State::Up));
}

#[test]
fn seed_raid5_full_stripe_write_costs_no_reads() {
    let drives = drives_for(4, 2 * MIB);
    let set = create(&parse(SEED).unwrap(), &drives, &fresh).unwrap();
    let v = set.volume("raid").unwrap();
    v.reset_stats();
    v.write_at(&pattern(3 * 512 * 1024, 2), 0).unwrap();
    let t = drive_totals(&v);
    assert_eq!((t.reads, t.writes), (0, 4));
}

#[test]
fn seed_raid5_4k_writes_cost_two_reads_two_writes_each() {
    let drives = drives_for(4, 2 * MIB);
    let set = create(&parse(SEED).unwrap(), &drives, &fresh).unwrap();
    let v = set.volume("raid").unwrap();
    v.reset_stats();
    for i in 0..16u64 {
        v.write_at(&pattern(4096, i), (i * 97 % 700) * 4096).unwrap();
    }
    let t = drive_totals(&v);
    assert_eq!((t.reads, t.writes), (32, 32));
}
