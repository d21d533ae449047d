//! The drive header and the configuration copy (docs/formats.md, "Volume
//! metadata"): their layouts, the bounds of every field, and decoders that
//! check each field against its bound before anything uses it, so that a
//! damaged or crafted structure gives a [`MetadataFault`] naming the
//! device, the byte and the field, never a panic, a hang or a wrong value.
//!
//! This module only encodes, decodes and checks; `quorum.rs` decides
//! which copy a set is assembled from and `metadata.rs` where each goes.

use std::collections::HashMap;
use std::sync::Arc;

use codec::{Frame, LeReader, LeWriter};
use device::signature::IOLAB_VOLUME_MAGIC;
use device::Device;

use crate::config::{parse, Config, CONFIG_SECTOR_BYTES};
use crate::error::{FaultKind, MetadataArea, MetadataFault, VolumeError};
use crate::object::AbsentDevice;
use crate::resolve::{resolve, Layout, DATA_START_BYTES};

/// Version of the header and configuration copy layouts (2: the
/// configuration slots shrank to make room for the statistics slots).
pub const METADATA_VERSION: u32 = 2;
/// Magic of a configuration copy.
pub const CONFIG_MAGIC: &[u8; 8] = b"IOLABCFG";
/// Bytes of the drive header (one 4Kn sector).
pub const HEADER_BYTES: u64 = 4096;
/// Bytes of one configuration copy.
pub const CONFIG_COPY_BYTES: u64 = 49_152;
/// Byte offset of the first of the two statistics slots.
pub const STATS_AREA_BYTES_AT: u64 = HEADER_BYTES + 2 * CONFIG_COPY_BYTES;
/// Bytes of one statistics slot (two per drive; the record's layout is in
/// `counters.rs`).
pub const STATS_SLOT_BYTES: u64 = 16_384;
/// Bytes of the fixed part of a configuration copy before its text.
pub const CONFIG_PREFIX_BYTES: usize = 48;
/// Longest configuration text a copy holds.
pub const CONFIG_TEXT_BYTES_MAX: usize = CONFIG_COPY_BYTES as usize - CONFIG_PREFIX_BYTES;
/// Longest drive name a header holds.
pub const DRIVE_NAME_BYTES_MAX: usize = 63;
/// Highest generation a configuration copy may carry: a save every
/// microsecond would take two thousand years to reach it, so a larger one
/// is damage, and the generations after it (`+ 1`, `+ 2`) cannot overflow.
pub const GENERATION_MAX: u64 = 1 << 56;

const NAME_AT: usize = 32;
const NAME_FIELD_BYTES: usize = 64;
const DRIVE_BYTES_AT: usize = 96;
/// Bytes 136..4096 of the header are reserved, zero.
const HEADER_RESERVED_AT: usize = 136;
/// The checksum of a header and of a configuration copy: at byte 12, over
/// the structure with the field zero.
const FRAME: Frame = Frame::zeroed(12);

/// The four layout fields of a header, each fixed in version 2: (offset,
/// name in docs/formats.md, value).
const LAYOUT_FIELDS: [(usize, &str, u64); 4] = [
    (104, "data_start_bytes", DATA_START_BYTES),
    (112, "config_slot_bytes", CONFIG_COPY_BYTES),
    (120, "stats_slot_bytes", STATS_SLOT_BYTES),
    (128, "stats_area_at", STATS_AREA_BYTES_AT),
];

/// What a drive header says: the set, the drive, its size at creation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriveHeader {
    pub set_id: [u8; 16],
    pub drive: String,
    pub drive_bytes: u64,
}

/// A configuration copy that passed every check of its own bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigCopy {
    pub generation: u64,
    pub text: String,
}

/// Byte offset of configuration slot `slot` (0 or 1) on a drive.
pub fn config_slot_at(slot: u8) -> u64 {
    assert!(slot < 2, "a drive has configuration slots 0 and 1");
    HEADER_BYTES + u64::from(slot) * CONFIG_COPY_BYTES
}

/// Byte offset of statistics slot `slot` (0 or 1) on a drive.
pub fn stats_slot_at(slot: u8) -> u64 {
    assert!(slot < 2, "a drive has statistics slots 0 and 1");
    STATS_AREA_BYTES_AT + u64::from(slot) * STATS_SLOT_BYTES
}

/// The slot generation `generation` goes to: generations alternate
/// between the two, so a torn write leaves the previous one intact.
pub fn slot_of(generation: u64) -> u8 {
    (generation % 2) as u8
}

/// The 4096 bytes of a drive header.
pub fn encode_drive_header(header: &DriveHeader) -> Vec<u8> {
    assert!(header.drive.len() <= DRIVE_NAME_BYTES_MAX, "create checks drive names");
    let mut block = vec![0u8; HEADER_BYTES as usize];
    let mut w = LeWriter::new(&mut block);
    w.put_bytes(0, IOLAB_VOLUME_MAGIC)
        .put_u32(8, METADATA_VERSION)
        .put_bytes(16, &header.set_id)
        .put_bytes(NAME_AT, header.drive.as_bytes())
        .put_u64(DRIVE_BYTES_AT, header.drive_bytes);
    for (at, _, value) in LAYOUT_FIELDS {
        w.put_u64(at, value);
    }
    FRAME.seal(&[], &mut block);
    block
}

/// Reads a fault's fields from a structure, every read checked (the
/// drive header, the configuration copies, the statistics records).
pub(crate) struct Fields<'a> {
    pub device: &'a str,
    pub area: MetadataArea,
    /// Byte offset of the structure on the device.
    pub base: u64,
    pub bytes: &'a [u8],
}

impl Fields<'_> {
    pub fn fault(&self, at: usize, field: &'static str, problem: FaultKind) -> MetadataFault {
        MetadataFault {
            device: self.device.to_string(),
            drive: None,
            area: self.area,
            offset: self.base + at as u64,
            field,
            problem,
        }
    }

    pub fn cut(&self, at: usize, field: &'static str, len: usize) -> MetadataFault {
        let problem = FaultKind::CutShort { have: self.bytes.len(), needed: at + len };
        self.fault(at, field, problem)
    }

    pub fn u32(&self, at: usize, field: &'static str) -> Result<u32, MetadataFault> {
        LeReader::new(self.bytes).u32(at).map_err(|_| self.cut(at, field, 4))
    }

    pub fn u64(&self, at: usize, field: &'static str) -> Result<u64, MetadataFault> {
        LeReader::new(self.bytes).u64(at).map_err(|_| self.cut(at, field, 8))
    }

    pub fn bytes(&self, at: usize, len: usize, field: &'static str) -> Result<&[u8], MetadataFault> {
        LeReader::new(self.bytes).bytes(at, len).map_err(|_| self.cut(at, field, len))
    }

    pub fn magic(&self, expected: &'static [u8; 8], name: &'static str) -> Result<(), MetadataFault> {
        let found = self.bytes(0, 8, "magic")?;
        if found == expected {
            return Ok(());
        }
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(found);
        Err(self.fault(0, "magic", FaultKind::Magic { found: bytes, expected: name }))
    }

    /// The version at byte 8 is `supported`.
    pub fn version(&self, supported: u32) -> Result<(), MetadataFault> {
        let found = self.u32(8, "version")?;
        if found == supported {
            return Ok(());
        }
        Err(self.fault(8, "version", FaultKind::Version { found, supported }))
    }

    pub fn u8(&self, at: usize, field: &'static str) -> Result<u8, MetadataFault> {
        LeReader::new(self.bytes).u8(at).map_err(|_| self.cut(at, field, 1))
    }

    /// The checksum over `covered` bytes from the start (already bounded).
    pub fn checksum(&self, covered: usize) -> Result<(), MetadataFault> {
        let record = self.bytes(0, covered, "crc32c")?;
        match FRAME.verify(&[], record) {
            Ok(()) => Ok(()),
            Err(codec::FrameError::Mismatch { stored, computed }) => {
                Err(self.fault(12, "crc32c", FaultKind::Checksum { stored, computed }))
            }
            Err(codec::FrameError::OutOfBounds(_)) => Err(self.cut(12, "crc32c", 4)),
        }
    }

    /// Every byte of `at..at+len` is zero.
    pub fn zero(&self, at: usize, len: usize, field: &'static str) -> Result<(), MetadataFault> {
        let bytes = self.bytes(at, len, field)?;
        match bytes.iter().position(|&b| b != 0) {
            None => Ok(()),
            Some(i) => Err(self.fault(at + i, field, FaultKind::Malformed("reserved, must be zero".into()))),
        }
    }
}

/// A header that passes every check of docs/formats.md, read from
/// `device` of `device_bytes` bytes: magic, version, checksum, the four
/// fixed layout fields, the drive size (more than the metadata area, at
/// most the device's size, whole sectors), the drive name (1 to 63 bytes
/// of UTF-8 a configuration line can hold, NUL-padded) and the reserved
/// bytes (zero).
pub fn decode_drive_header(
    device: &str,
    device_bytes: u64,
    block: &[u8],
) -> Result<DriveHeader, MetadataFault> {
    let f = Fields { device, area: MetadataArea::Header, base: 0, bytes: block };
    if block.len() < HEADER_BYTES as usize {
        return Err(f.cut(0, "header", HEADER_BYTES as usize));
    }
    let f = Fields { bytes: &block[..HEADER_BYTES as usize], ..f };
    f.magic(IOLAB_VOLUME_MAGIC, "IOLABVOL")?;
    f.version(METADATA_VERSION)?;
    f.checksum(HEADER_BYTES as usize)?;
    for (at, field, expected) in LAYOUT_FIELDS {
        let found = f.u64(at, field)?;
        if found != expected {
            return Err(f.fault(at, field, FaultKind::Fixed { found, expected }));
        }
    }
    let drive_bytes = check_drive_bytes(&f, device_bytes)?;
    let drive = check_drive_name(&f)?;
    f.zero(HEADER_RESERVED_AT, HEADER_BYTES as usize - HEADER_RESERVED_AT, "reserved")?;
    let set_id = f.bytes(16, 16, "set_id")?;
    let mut id = [0u8; 16];
    id.copy_from_slice(set_id);
    Ok(DriveHeader { set_id: id, drive, drive_bytes })
}

fn check_drive_bytes(f: &Fields<'_>, device_bytes: u64) -> Result<u64, MetadataFault> {
    let found = f.u64(DRIVE_BYTES_AT, "drive_bytes")?;
    let whole = found % CONFIG_SECTOR_BYTES == 0;
    if found > DATA_START_BYTES && found <= device_bytes && whole {
        return Ok(found);
    }
    let bounds = format!(
        "more than the {DATA_START_BYTES}-byte metadata area, at most the device's {device_bytes} bytes \
         (a device smaller than at creation was cut short), whole {CONFIG_SECTOR_BYTES}-byte sectors"
    );
    Err(f.fault(DRIVE_BYTES_AT, "drive_bytes", FaultKind::OutOfBounds { found, bounds }))
}

/// The name field: UTF-8, 1 to 63 bytes a configuration line can carry
/// as one word, then NULs to the end of the field.
fn check_drive_name(f: &Fields<'_>) -> Result<String, MetadataFault> {
    let field = f.bytes(NAME_AT, NAME_FIELD_BYTES, "drive_name")?;
    let len = field.iter().position(|&b| b == 0).unwrap_or(NAME_FIELD_BYTES);
    let malformed =
        |at: usize, why: &str| f.fault(NAME_AT + at, "drive_name", FaultKind::Malformed(why.into()));
    if len == 0 || len > DRIVE_NAME_BYTES_MAX {
        let bounds = format!("1 to {DRIVE_NAME_BYTES_MAX} bytes, then NULs");
        let problem = FaultKind::OutOfBounds { found: len as u64, bounds };
        return Err(f.fault(NAME_AT, "drive_name", problem));
    }
    if let Some(i) = field[len..].iter().position(|&b| b != 0) {
        return Err(malformed(len + i, "bytes after the name's NUL padding are not zero"));
    }
    let name = std::str::from_utf8(&field[..len]).map_err(|e| malformed(e.valid_up_to(), "not UTF-8"))?;
    if let Some(i) = name.find(|c: char| c.is_whitespace() || c.is_control() || c == '#') {
        return Err(malformed(i, "a drive name holds no blank, control character or '#'"));
    }
    Ok(name.to_string())
}

/// The name field of a header that failed its checks, if it still reads
/// as a name: a hint to which drive a damaged device was, never trusted
/// alone (see `metadata.rs`).
pub(crate) fn loose_drive_name(block: &[u8]) -> Option<String> {
    let field = LeReader::new(block).bytes(NAME_AT, NAME_FIELD_BYTES).ok()?;
    let len = field.iter().position(|&b| b == 0).unwrap_or(NAME_FIELD_BYTES);
    let name = std::str::from_utf8(field.get(..len)?).ok()?;
    let usable = (1..=DRIVE_NAME_BYTES_MAX).contains(&len) && !name.contains(char::is_whitespace);
    usable.then(|| name.to_string())
}

/// One slot's bytes: the copy with its generation and text, or an error
/// when the text does not fit ([`CONFIG_TEXT_BYTES_MAX`]).
pub fn encode_config_copy(set_id: &[u8; 16], generation: u64, text: &str) -> Result<Vec<u8>, VolumeError> {
    if text.len() > CONFIG_TEXT_BYTES_MAX {
        return Err(VolumeError::Metadata(format!(
            "configuration is {} bytes; the metadata holds at most {CONFIG_TEXT_BYTES_MAX}",
            text.len()
        )));
    }
    let mut copy = vec![0u8; CONFIG_COPY_BYTES as usize];
    LeWriter::new(&mut copy)
        .put_bytes(0, CONFIG_MAGIC)
        .put_u32(8, METADATA_VERSION)
        .put_bytes(16, set_id)
        .put_u64(32, generation)
        .put_u32(40, text.len() as u32)
        .put_bytes(CONFIG_PREFIX_BYTES, text.as_bytes());
    FRAME.seal(&[], &mut copy[..CONFIG_PREFIX_BYTES + text.len()]);
    Ok(copy)
}

/// A configuration copy read from slot `slot` of `device` that passes
/// every check of its own bytes: magic, version, text length (1 to
/// [`CONFIG_TEXT_BYTES_MAX`], checked before the checksum that covers it
/// is computed), checksum, set id (`set_id`, the header's), generation (1
/// to [`GENERATION_MAX`], in the slot its parity names), reserved bytes
/// (zero), text (UTF-8). What the text says is checked by
/// [`check_config_text`].
pub fn decode_config_copy(
    device: &str,
    slot: u8,
    set_id: &[u8; 16],
    copy: &[u8],
) -> Result<ConfigCopy, MetadataFault> {
    let area = MetadataArea::ConfigSlot(slot);
    let f = Fields { device, area, base: config_slot_at(slot), bytes: copy };
    if copy.len() < CONFIG_COPY_BYTES as usize {
        return Err(f.cut(0, "copy", CONFIG_COPY_BYTES as usize));
    }
    f.magic(CONFIG_MAGIC, "IOLABCFG")?;
    f.version(METADATA_VERSION)?;
    let text_bytes = f.u32(40, "text_bytes")? as usize;
    if text_bytes == 0 || text_bytes > CONFIG_TEXT_BYTES_MAX {
        let bounds = format!("1 to {CONFIG_TEXT_BYTES_MAX}");
        return Err(f.fault(40, "text_bytes", FaultKind::OutOfBounds { found: text_bytes as u64, bounds }));
    }
    f.checksum(CONFIG_PREFIX_BYTES + text_bytes)?;
    if f.bytes(16, 16, "set_id")? != set_id {
        return Err(f.fault(16, "set_id", FaultKind::OtherSet));
    }
    let generation = check_generation(&f, slot)?;
    f.zero(44, 4, "reserved")?;
    let text = f.bytes(CONFIG_PREFIX_BYTES, text_bytes, "text")?;
    let text = std::str::from_utf8(text).map_err(|e| {
        f.fault(CONFIG_PREFIX_BYTES + e.valid_up_to(), "text", FaultKind::Malformed("not UTF-8".into()))
    })?;
    Ok(ConfigCopy { generation, text: text.to_string() })
}

fn check_generation(f: &Fields<'_>, slot: u8) -> Result<u64, MetadataFault> {
    let found = f.u64(32, "generation")?;
    if found == 0 || found > GENERATION_MAX {
        let bounds = format!("1 to {GENERATION_MAX}");
        return Err(f.fault(32, "generation", FaultKind::OutOfBounds { found, bounds }));
    }
    if slot_of(found) != slot {
        let bounds = format!("generation g lives in slot g mod 2, and this is slot {slot}");
        return Err(f.fault(32, "generation", FaultKind::OutOfBounds { found, bounds }));
    }
    Ok(found)
}

/// A drive that is present, as the checks of a copy's text see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PresentDrive {
    pub size_bytes: u64,
    pub sector_bytes: u32,
}

/// What a copy's text is checked against: where it was read, the drive
/// whose header it sits behind, and the drives present (by name).
pub struct TextCheck<'a> {
    pub device: &'a str,
    pub slot: u8,
    pub drive: &'a str,
    pub present: &'a HashMap<String, PresentDrive>,
}

/// What a copy's text says, checked against everything assembly will
/// rely on: it parses; it defines a drive and a volume and names the drive
/// it was read from; every subdisk has an explicit offset past the
/// metadata area and a length (a saved copy gives every size); laid out on
/// the drives present (a drive not present is taken as long as its last
/// subdisk) nothing overlaps or runs past a drive; and it binds, stripes
/// and subdisks on the drives' sectors. Returns the layout.
pub fn check_config_text(check: &TextCheck<'_>, copy: &ConfigCopy) -> Result<Layout, MetadataFault> {
    let text_fault = |line: usize, problem: FaultKind| MetadataFault {
        device: check.device.to_string(),
        drive: Some(check.drive.to_string()),
        area: MetadataArea::ConfigSlot(check.slot),
        offset: config_slot_at(check.slot) + (CONFIG_PREFIX_BYTES + line_offset(&copy.text, line)) as u64,
        field: "text",
        problem,
    };
    let config = parse(&copy.text).map_err(|e| text_fault(e.line(), FaultKind::Text(Box::new(e))))?;
    check_saved_shape(check, &config).map_err(|(line, why)| text_fault(line, FaultKind::Malformed(why)))?;
    let mut sizes: HashMap<String, u64> =
        config.drives.iter().map(|d| (d.name.clone(), extent_end_bytes(&config, &d.name))).collect();
    for (name, drive) in check.present {
        sizes.insert(name.clone(), drive.size_bytes);
    }
    let layout = resolve(&config, &sizes).map_err(|e| text_fault(e.line(), FaultKind::Text(Box::new(e))))?;
    trial_bind(check, &layout, &sizes).map_err(|e| text_fault(1, FaultKind::Malformed(e.to_string())))?;
    Ok(layout)
}

/// The shape every saved copy has: a drive and a volume, the drive it
/// sits behind named, every subdisk explicit. (line, problem) otherwise.
fn check_saved_shape(check: &TextCheck<'_>, config: &Config) -> Result<(), (usize, String)> {
    if config.drives.is_empty() || config.volumes.is_empty() {
        return Err((1, "defines no drive or no volume: a saved copy always has both".into()));
    }
    if let Some(drive) = config.drives.iter().find(|d| d.name.len() > DRIVE_NAME_BYTES_MAX) {
        return Err((
            drive.line,
            format!("drive name '{}' is longer than {DRIVE_NAME_BYTES_MAX} bytes", drive.name),
        ));
    }
    if !config.drives.iter().any(|d| d.name == check.drive) {
        return Err((1, format!("names no drive '{}', the drive whose header it sits behind", check.drive)));
    }
    let sds = config.volumes.iter().flat_map(|v| &v.plexes).flat_map(|p| &p.subdisks);
    for sd in sds {
        let explicit = sd.length_bytes > 0 && sd.drive_offset_bytes.is_some_and(|o| o >= DATA_START_BYTES);
        if !explicit {
            return Err((
                sd.line,
                format!(
                    "subdisk '{}' has no explicit length and driveoffset past the metadata area: a saved copy \
                     gives every size",
                    sd.name
                ),
            ));
        }
    }
    Ok(())
}

/// Binds the layout to stand-ins of the drives (their sizes and sector
/// sizes, no I/O), so every rule binding checks holds before assembly
/// relies on the copy.
fn trial_bind(
    check: &TextCheck<'_>,
    layout: &Layout,
    sizes: &HashMap<String, u64>,
) -> Result<(), VolumeError> {
    let sector_max = check.present.values().map(|d| d.sector_bytes).max().unwrap_or(512);
    let mut devices: HashMap<String, Arc<dyn Device>> = HashMap::new();
    for drive in &layout.drives {
        let size = sizes.get(&drive.name).copied().unwrap_or(DATA_START_BYTES);
        let sector = check.present.get(&drive.name).map_or(sector_max, |d| d.sector_bytes);
        devices.insert(
            drive.name.clone(),
            Arc::new(AbsentDevice::new(&drive.name, &drive.device, size, sector)),
        );
    }
    crate::volume::bind(layout, &devices).map(|_| ())
}

/// Where the last subdisk on `drive` ends: the size a drive that is not
/// present is taken to have (a saved configuration gives every offset and
/// length).
pub(crate) fn extent_end_bytes(config: &Config, drive: &str) -> u64 {
    let sds = config.volumes.iter().flat_map(|v| &v.plexes).flat_map(|p| &p.subdisks);
    sds.filter(|sd| sd.drive == drive)
        .map(|sd| sd.drive_offset_bytes.unwrap_or(DATA_START_BYTES).saturating_add(sd.length_bytes))
        .max()
        .unwrap_or(DATA_START_BYTES)
}

/// Byte offset of 1-based line `line` in `text` (its end for a line past
/// the last).
fn line_offset(text: &str, line: usize) -> usize {
    text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum()
}

/// True when a metadata area whose header failed its checks still shows
/// it was a volume drive (the header's magic, or a configuration copy's
/// at either slot), or is blank (all zero, a replacement): such a device
/// is a damaged drive of the set, not a stranger.
pub(crate) fn volume_remnants(area: &[u8]) -> bool {
    let at = |offset: u64| area.get(offset as usize..offset as usize + 8);
    let ours = at(0) == Some(IOLAB_VOLUME_MAGIC.as_slice())
        || at(config_slot_at(0)) == Some(CONFIG_MAGIC.as_slice())
        || at(config_slot_at(1)) == Some(CONFIG_MAGIC.as_slice());
    ours || area.iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    //! The bytes of a drive header and a configuration copy, field by
    //! field, as docs/formats.md ("Volume metadata") gives them, taken from
    //! the encoders before their little-endian and checksum code moved to
    //! the codec crate.

    use super::*;
    use codec::golden::assert_layout;

    const SET: &str = "07070707070707070707070707070707";

    fn header() -> DriveHeader {
        DriveHeader { set_id: [7; 16], drive: "d0".into(), drive_bytes: 1 << 30 }
    }

    #[test]
    fn a_drive_header_is_byte_for_byte_the_documented_one() {
        let block = encode_drive_header(&header());
        assert_layout(
            &block,
            &[
                (0, "494f4c4142564f4c"),   // magic "IOLABVOL"
                (8, "02000000"),           // version 2
                (12, "0542df29"),          // crc32c of the header with this field zero
                (16, SET),                 // set id
                (32, "6430"),              // drive name "d0"
                (96, "0000004000000000"),  // drive bytes
                (104, "0010020000000000"), // data start
                (112, "00c0000000000000"), // configuration copy bytes
                (120, "0040000000000000"), // statistics slot bytes
                (128, "0090010000000000"), // statistics area offset
            ],
        );
        assert_eq!(decode_drive_header("d0", 1 << 30, &block).unwrap(), header());
    }

    #[test]
    fn a_configuration_copy_is_byte_for_byte_the_documented_one() {
        let copy = encode_config_copy(&[7; 16], 5, "drive d0\n").unwrap();
        assert_eq!(copy.len() as u64, CONFIG_COPY_BYTES);
        assert_layout(
            &copy,
            &[
                (0, "494f4c4142434647"),    // magic "IOLABCFG"
                (8, "02000000"),            // version 2
                (12, "fb90be89"),           // crc32c of the prefix and text with this field zero
                (16, SET),                  // set id
                (32, "0500000000000000"),   // generation
                (40, "09000000"),           // text bytes
                (48, "64726976652064300a"), // "drive d0\n"
            ],
        );
        let back = decode_config_copy("d0", 1, &[7; 16], &copy).unwrap();
        assert_eq!(back, ConfigCopy { generation: 5, text: "drive d0\n".into() });
    }

    #[test]
    fn a_header_on_a_device_smaller_than_at_creation_names_the_field() {
        let block = encode_drive_header(&header());
        let err = decode_drive_header("d0.img", 1 << 20, &block).unwrap_err();
        assert_eq!((err.offset, err.field), (96, "drive_bytes"), "{err}");
    }

    #[test]
    fn a_copy_in_the_slot_of_the_other_parity_is_refused() {
        let copy = encode_config_copy(&[7; 16], 5, "drive d0\n").unwrap();
        let err = decode_config_copy("d0.img", 0, &[7; 16], &copy).unwrap_err();
        assert_eq!((err.offset, err.field), (HEADER_BYTES + 32, "generation"), "{err}");
    }

    #[test]
    fn a_text_error_names_the_byte_of_its_line() {
        let text = "drive d0 device a\nvolume v\nplex org striped 1000\nsd length 1m drive d0\n";
        let copy = ConfigCopy { generation: 3, text: text.into() };
        let present = HashMap::new();
        let check = TextCheck { device: "a", slot: 1, drive: "d0", present: &present };
        let err = check_config_text(&check, &copy).unwrap_err();
        let line3 = "drive d0 device a\nvolume v\n".len() as u64;
        assert_eq!(err.offset, config_slot_at(1) + CONFIG_PREFIX_BYTES as u64 + line3, "{err}");
        assert!(err.to_string().contains("drive 'd0', a: configuration slot 1"), "{err}");
        assert!(err.to_string().contains("on disk, line 3"), "{err}");
    }
}
