//! The crash-injecting device against a model: a durable image plus the
//! list of writes issued since the last flush.

use std::sync::Arc;

use device::{Backend, CrashDevice, CrashPolicy, Device, Front, Geometry, MemDevice};
use proptest::prelude::*;

const SECTOR: usize = 512;
const SECTORS: usize = 32;

#[derive(Clone, Debug)]
enum Step {
    Write { sector: usize, count: usize },
    Flush,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..SECTORS, 1..=4usize).prop_map(|(sector, count)| Step::Write {
            sector: sector.min(SECTORS - count),
            count
        }),
        1 => Just(Step::Flush),
    ]
}

fn policy() -> impl Strategy<Value = CrashPolicy> {
    prop_oneof![
        Just(CrashPolicy::DropUnflushed),
        Just(CrashPolicy::KeepAll),
        Just(CrashPolicy::KeepSubset),
        Just(CrashPolicy::TornWrite),
        (0..8usize).prop_map(CrashPolicy::Prefix),
    ]
}

/// Distinct contents for every (write, sector) so any mix-up shows.
fn payload(write: usize, count: usize) -> Vec<u8> {
    (0..count * SECTOR).map(|i| ((write * 31 + i / SECTOR * 7 + 1) % 256) as u8).collect()
}

struct Model {
    durable: Vec<u8>,
    pending: Vec<(usize, Vec<u8>)>,
}

impl Model {
    fn run(dev: &CrashDevice, steps: &[Step]) -> Model {
        let mut model = Model { durable: vec![0; SECTOR * SECTORS], pending: Vec::new() };
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::Write { sector, count } => {
                    let data = payload(i, *count);
                    dev.write_at(&data, (sector * SECTOR) as u64).unwrap();
                    model.pending.push((sector * SECTOR, data));
                }
                Step::Flush => {
                    dev.flush().unwrap();
                    for (offset, data) in model.pending.drain(..) {
                        model.durable[offset..offset + data.len()].copy_from_slice(&data);
                    }
                }
            }
        }
        model
    }

    fn apply(&self, keep: impl Fn(usize) -> bool) -> Vec<u8> {
        let mut image = self.durable.clone();
        for (i, (offset, data)) in self.pending.iter().enumerate() {
            if keep(i) {
                image[*offset..offset + data.len()].copy_from_slice(data);
            }
        }
        image
    }
}

fn setup(steps: &[Step]) -> (CrashDevice, Model) {
    let inner = Arc::new(MemDevice::new((SECTOR * SECTORS) as u64).unwrap());
    let dev = CrashDevice::new(inner).unwrap();
    let model = Model::run(&dev, steps);
    (dev, model)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn image_is_durable_plus_the_kept_writes(steps in prop::collection::vec(step(), 0..24), policy in policy(), seed: u64) {
        let (dev, model) = setup(&steps);
        let outcome = dev.crash(policy, seed).unwrap();
        prop_assert_eq!(outcome.pending, model.pending.len());
        let mut expected = model.apply(|i| outcome.kept.contains(&i));
        if let Some((victim, mask)) = &outcome.torn {
            let (offset, data) = &model.pending[*victim];
            for (s, new) in mask.iter().enumerate() {
                if *new {
                    let at = offset + s * SECTOR;
                    // A torn write lands before any later kept write over it.
                    let later_kept = model.pending.iter().enumerate().skip(victim + 1).any(|(j, (o, d))| {
                        outcome.kept.contains(&j) && *o <= at && at < o + d.len()
                    });
                    if !later_kept {
                        expected[at..at + SECTOR].copy_from_slice(&data[s * SECTOR..(s + 1) * SECTOR]);
                    }
                }
            }
        }
        prop_assert_eq!(outcome.image.to_vec(), expected);
    }

    #[test]
    fn every_sector_is_durable_or_from_a_pending_write(steps in prop::collection::vec(step(), 0..24), policy in policy(), seed: u64) {
        let (dev, model) = setup(&steps);
        let image = dev.crash(policy, seed).unwrap().image.to_vec();
        for s in 0..SECTORS {
            let at = s * SECTOR;
            let got = &image[at..at + SECTOR];
            let durable = &model.durable[at..at + SECTOR];
            let from_pending = model.pending.iter().any(|(o, d)| {
                *o <= at && at < o + d.len() && &d[at - o..at - o + SECTOR] == got
            });
            prop_assert!(got == durable || from_pending, "sector {} holds data no write put there", s);
        }
    }

    #[test]
    fn flushed_data_always_survives(steps in prop::collection::vec(step(), 0..24), seed: u64) {
        let (dev, model) = setup(&steps);
        let image = dev.crash(CrashPolicy::DropUnflushed, seed).unwrap().image.to_vec();
        prop_assert_eq!(image, model.durable);
    }

    #[test]
    fn torn_write_mixes_only_its_own_old_and_new_sectors(steps in prop::collection::vec(step(), 1..24), seed: u64) {
        let (dev, model) = setup(&steps);
        let outcome = dev.crash(CrashPolicy::TornWrite, seed).unwrap();
        if let Some((victim, mask)) = outcome.torn {
            let sectors = model.pending[victim].1.len() / SECTOR;
            prop_assert_eq!(mask.len(), sectors);
            if sectors >= 2 {
                prop_assert!(mask.contains(&true) && mask.contains(&false), "a torn write keeps some old and some new sectors");
            }
            prop_assert!(!outcome.kept.contains(&victim));
        } else {
            prop_assert!(model.pending.is_empty());
        }
    }

    #[test]
    fn same_seed_gives_the_same_image(steps in prop::collection::vec(step(), 0..24), policy in policy(), seed: u64) {
        let (dev, _) = setup(&steps);
        let a = dev.crash(policy, seed).unwrap().image.to_vec();
        let b = dev.crash(policy, seed).unwrap().image.to_vec();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn write_in_flight_when_a_flush_is_issued_is_not_made_durable() {
    // A device whose write blocks until a flush has been issued on the crash
    // device: the write is in flight when the flush starts.
    use std::sync::{Barrier, Mutex};
    struct Gate {
        front: Front,
        inner: MemDevice,
        entered: Barrier,
        release: Barrier,
        armed: Mutex<bool>,
    }
    impl Backend for Gate {
        fn front(&self) -> &Front {
            &self.front
        }
        fn read_raw(&self, buf: &mut [u8], offset: u64, _: device::Checked) -> device::Result<()> {
            self.inner.read_at(buf, offset)
        }
        fn write_raw(&self, buf: &[u8], offset: u64, _: device::Checked) -> device::Result<()> {
            let armed = std::mem::take(&mut *self.armed.lock().unwrap());
            if armed {
                self.entered.wait();
                self.release.wait();
            }
            self.inner.write_at(buf, offset)
        }
        fn flush_raw(&self, _: device::Checked) -> device::Result<()> {
            self.inner.flush()
        }
    }
    let gate = Arc::new(Gate {
        front: Front::new("gate", Geometry::new(8192, 512)),
        inner: MemDevice::new(8192).unwrap(),
        entered: Barrier::new(2),
        release: Barrier::new(2),
        armed: Mutex::new(true),
    });
    let dev = Arc::new(CrashDevice::new(gate.clone()).unwrap());
    let writer = {
        let dev = dev.clone();
        std::thread::spawn(move || dev.write_at(&[7; 512], 0).unwrap())
    };
    gate.entered.wait();
    dev.flush().unwrap();
    gate.release.wait();
    writer.join().unwrap();
    let image = dev.crash(CrashPolicy::DropUnflushed, 0).unwrap().image.to_vec();
    assert_eq!(&image[..512], &[0; 512], "the in-flight write must not be durable");
    assert_eq!(dev.pending_writes(), 1);
}
