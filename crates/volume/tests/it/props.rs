//! Random reads and writes against a `Vec<u8>` image of the volume.

use device::Device;
use proptest::prelude::*;
use volume::State;

use crate::common::*;

const SECTOR: u64 = 512;
const REQUEST_SECTORS_MAX: u64 = 64;

#[derive(Clone, Debug)]
enum Step {
    Write { sector: u64, sectors: u64, seed: u64 },
    Read { sector: u64, sectors: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (any::<u64>(), 1..=REQUEST_SECTORS_MAX, any::<u64>())
            .prop_map(|(sector, sectors, seed)| Step::Write { sector, sectors, seed }),
        (any::<u64>(), 1..=REQUEST_SECTORS_MAX).prop_map(|(sector, sectors)| Step::Read { sector, sectors }),
    ]
}

/// Clamps a random request into the volume.
fn place(size_bytes: u64, sector: u64, sectors: u64) -> (u64, usize) {
    let total = size_bytes / SECTOR;
    let start = sector % total;
    let count = sectors.min(total - start);
    (start * SECTOR, (count * SECTOR) as usize)
}

/// Runs `steps` on the first volume of `text` (drives d0..d{count-1} of
/// 1 MiB); at step `fail.0` drive `d{fail.1}` goes down. Every read must
/// return the model's bytes.
fn check(
    text: &str,
    count: usize,
    steps: &[Step],
    fail: Option<(usize, usize, usize)>,
) -> Result<(), TestCaseError> {
    let drives = drives_for(count, MIB);
    let v = open(text, &drives);
    let mut model = vec![0u8; v.size_bytes() as usize];
    for (index, step) in steps.iter().enumerate() {
        if let Some((at, drive, revive_at)) = fail {
            if at == index {
                v.set_state(&format!("d{drive}"), State::Down).unwrap();
            }
            if revive_at == index && revive_at > at {
                v.revive(&format!("d{drive}")).unwrap();
            }
        }
        match *step {
            Step::Write { sector, sectors, seed } => {
                let (offset, len) = place(v.size_bytes(), sector, sectors);
                let data = pattern(len, seed);
                v.write_at(&data, offset).unwrap();
                model[offset as usize..][..len].copy_from_slice(&data);
            }
            Step::Read { sector, sectors } => {
                let (offset, len) = place(v.size_bytes(), sector, sectors);
                let mut buf = vec![0; len];
                v.read_at(&mut buf, offset).unwrap();
                prop_assert!(
                    buf == model[offset as usize..][..len],
                    "read at {offset} of {len} bytes differs"
                );
            }
        }
    }
    let mut whole = vec![0; model.len()];
    v.read_at(&mut whole, 0).unwrap();
    prop_assert!(whole == model, "final image differs");
    let all_up =
        fail.is_none_or(|(at, _, revive_at)| revive_at > at && revive_at < steps.len() || at >= steps.len());
    if all_up {
        for report in v.check_parity().unwrap() {
            prop_assert_eq!(report.rows_mismatched, 0, "parity of {}", report.plex);
        }
    }
    Ok(())
}

const CONCAT: &str = "drive d0 device a\ndrive d1 device b\ndrive d2 device c\nvolume v\nplex org concat\n\
                      sd length 100k drive d0\nsd length 200k drive d1\nsd length 300k drive d2\n";

const MIRROR: &str = "drive d0 device a\ndrive d1 device b\ndrive d2 device c\ndrive d3 device d\nvolume v\n\
                      plex org striped 7s\nsd length 300k drive d0\nsd length 300k drive d1\n\
                      plex org raid5 5k\nsd length 200k drive d1\nsd length 200k drive d2\nsd length 200k drive d3\n";

/// Vinum's RAID-10 example (vinum(8)): two striped plexes over the same
/// five drives, the second shifted by two, so any drive down leaves both
/// plexes with a subdisk out of service.
pub const RAID10: &str = "drive d0 device a\ndrive d1 device b\ndrive d2 device c\ndrive d3 device d\n\
                          drive d4 device e\nvolume v\nplex org striped 7s\nsd length 100k drive d0\n\
                          sd length 100k drive d1\nsd length 100k drive d2\nsd length 100k drive d3\n\
                          sd length 100k drive d4\nplex org striped 7s\nsd length 100k drive d2\n\
                          sd length 100k drive d3\nsd length 100k drive d4\nsd length 100k drive d0\n\
                          sd length 100k drive d1\n";

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 1..24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn concat_reads_back_last_write(steps in steps()) {
        check(CONCAT, 3, &steps, None)?;
    }

    #[test]
    fn striped_non_power_of_two_reads_back_last_write(steps in steps()) {
        check(&single_plex("striped 7s", 3, "400k"), 3, &steps, None)?;
    }

    #[test]
    fn raid5_left_asymmetric_reads_back_and_keeps_parity(steps in steps()) {
        check(&single_plex("raid5 7s", 4, "300k"), 4, &steps, None)?;
    }

    #[test]
    fn raid5_left_symmetric_reads_back_and_keeps_parity(steps in steps()) {
        check(&single_plex("raid5 4k layout ls", 3, "300k"), 3, &steps, None)?;
    }

    #[test]
    fn raid5_survives_one_drive_down_and_revive(steps in steps(), at in 0usize..24, drive in 0usize..4, revive in 0usize..24) {
        check(&single_plex("raid5 7s", 4, "300k"), 4, &steps, Some((at, drive, revive)))?;
    }

    #[test]
    fn mirror_reads_back_and_keeps_parity(steps in steps()) {
        check(MIRROR, 4, &steps, None)?;
    }

    #[test]
    fn mirror_survives_one_drive_down_and_revive(steps in steps(), at in 0usize..24, drive in 0usize..4, revive in 0usize..24) {
        check(MIRROR, 4, &steps, Some((at, drive, revive)))?;
    }

    #[test]
    fn raid10_survives_one_drive_down_and_revive(steps in steps(), at in 0usize..24, drive in 0usize..5, revive in 0usize..24) {
        check(RAID10, 5, &steps, Some((at, drive, revive)))?;
    }
}
