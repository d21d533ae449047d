//! The reference model's own promises.

use std::ffi::OsStr;

use fsapi::{Errno, FileSystem, ModelFs, Owner, ROOT};

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

#[test]
fn readdir_offsets_survive_unlinks_as_rm_rf_needs() {
    let fs = ModelFs::new();
    for i in 0..10 {
        fs.create(ROOT, name(&format!("f{i}")), Owner::root(0o644)).unwrap();
    }
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let mut batch = Vec::new();
        fs.readdir(ROOT, offset, &mut |e| {
            batch.push(e);
            batch.len() < 3
        })
        .unwrap();
        if batch.is_empty() {
            break;
        }
        for e in &batch {
            fs.unlink(ROOT, OsStr::new(std::str::from_utf8(&e.name).unwrap())).unwrap();
            seen.push(e.name.clone());
        }
        offset = batch.last().unwrap().next;
    }
    assert_eq!(seen.len(), 10, "every entry listed once while they were removed");
}

#[test]
fn an_unlinked_file_lives_while_open() {
    let fs = ModelFs::new();
    let f = fs.create(ROOT, name("f"), Owner::root(0o644)).unwrap();
    fs.open(f.ino).unwrap();
    fs.forget(f.ino, 1);
    fs.unlink(ROOT, name("f")).unwrap();
    fs.write(f.ino, 0, b"still here").unwrap();
    fs.release(f.ino);
    assert_eq!(fs.getattr(f.ino), Err(Errno::STALE));
}

#[test]
fn a_directory_cannot_move_under_itself() {
    let fs = ModelFs::new();
    let a = fs.mkdir(ROOT, name("a"), Owner::root(0o755)).unwrap();
    fs.mkdir(a.ino, name("b"), Owner::root(0o755)).unwrap();
    let b = fs.lookup(a.ino, name("b")).unwrap();
    assert_eq!(fs.rename(ROOT, name("a"), b.ino, name("a")), Err(Errno::INVAL));
}

#[test]
fn a_name_over_255_bytes_is_refused() {
    let fs = ModelFs::new();
    let long = "x".repeat(256);
    assert_eq!(fs.create(ROOT, name(&long), Owner::root(0o644)), Err(Errno::NAMETOOLONG));
}

#[test]
fn a_write_or_truncation_past_the_largest_offset_linux_allows_is_efbig() {
    let fs = ModelFs::new();
    let f = fs.create(ROOT, name("f"), Owner::root(0o644)).unwrap();
    assert_eq!(fs.file_bytes_max(), i64::MAX as u64);
    assert_eq!(fs.write(f.ino, i64::MAX as u64, b"x"), Err(Errno::FBIG));
    let past = fsapi::SetAttr { size: Some(i64::MAX as u64 + 1), ..Default::default() };
    assert_eq!(fs.setattr(f.ino, &past), Err(Errno::FBIG));
    assert_eq!(fs.getattr(f.ino).unwrap().size, 0);
}

#[test]
fn an_exchange_of_a_directory_and_a_file_across_parents_moves_a_link_with_the_directory() {
    let fs = ModelFs::new();
    let (p, q) = (
        fs.mkdir(ROOT, name("p"), Owner::root(0o755)).unwrap(),
        fs.mkdir(ROOT, name("q"), Owner::root(0o755)).unwrap(),
    );
    let x = fs.mkdir(p.ino, name("x"), Owner::root(0o755)).unwrap();
    fs.create(q.ino, name("y"), Owner::root(0o644)).unwrap();
    fs.rename2(p.ino, name("x"), q.ino, name("y"), fsapi::RenameMode::Exchange).unwrap();
    assert_eq!(fs.lookup(q.ino, name("y")).unwrap().ino, x.ino);
    assert_eq!((fs.getattr(p.ino).unwrap().nlink, fs.getattr(q.ino).unwrap().nlink), (2, 3));
}

#[test]
fn renameat2_flags_other_than_one_mode_are_einval() {
    use fsapi::RenameMode;
    assert_eq!(RenameMode::from_flags(libc::RENAME_WHITEOUT), Err(Errno::INVAL));
    assert_eq!(RenameMode::from_flags(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE), Err(Errno::INVAL));
    assert_eq!(RenameMode::from_flags(libc::RENAME_EXCHANGE), Ok(RenameMode::Exchange));
}
