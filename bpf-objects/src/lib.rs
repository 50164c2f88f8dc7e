//! The XDP object built from `xdp/`, embedded in the binary, and the one
//! loader every userspace user of it goes through.
//!
//! Loading refuses an object whose recorded layout version differs from the
//! running userspace's [`linecard_common::LAYOUT_VERSION`]: a stale object
//! must fail loudly, not misread map values.

pub mod craft;
pub mod test_run;

use object::{Object, ObjectSection, ObjectSymbol};

include!(concat!(env!("OUT_DIR"), "/ebpf_status.rs"));

// Aligned: the ELF parser reads headers in place and needs 8-byte alignment.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/linecard-xdp.o"));

/// Why the XDP object cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("built without eBPF: {0}; rebuild after `bash scripts/install-deps.sh` to get the XDP programs")]
    BuiltWithout(&'static str),
    #[error("the XDP object has no readable LC_LAYOUT_VERSION symbol ({0}); it was not built from this tree")]
    NoLayoutVersion(String),
    #[error("stale XDP object: built for layout version {object}, this binary expects {expected}; rebuild")]
    LayoutMismatch { object: u32, expected: u32 },
    #[error("loading the XDP object into the kernel failed: {0} (are you root, and does the kernel have BPF?)")]
    Load(#[from] aya::EbpfError),
}

/// The embedded object bytes, checked against this binary's layout version.
pub fn object() -> Result<&'static [u8], ObjectError> {
    if let Some(reason) = UNAVAILABLE_REASON {
        return Err(ObjectError::BuiltWithout(reason));
    }
    check_layout(OBJECT)?;
    Ok(OBJECT)
}

/// Loads the embedded object into the kernel (programs not yet attached).
pub fn load() -> Result<aya::Ebpf, ObjectError> {
    load_with(Switches::default())
}

/// The load-time constants of the object: negative controls, each off in
/// a faithful engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct Switches {
    /// `names::FIXED_SWEEP_GLOBAL`: the detection sweep on its fixed period.
    pub fixed_sweep: bool,
    /// `names::UNVERIFIED_AUTH_GLOBAL`: authentication sections taken as
    /// genuine unchecked.
    pub unverified_auth: bool,
    /// `names::ECHO_UNLISTED_GLOBAL`: any self-addressed echo reflected.
    pub echo_unlisted: bool,
    /// `names::GTSM_FIRST_GLOBAL`: GTSM before the echo branch.
    pub gtsm_first: bool,
    /// `names::NO_GAPS_GLOBAL`: no gap recorded (the bench's comparison).
    pub no_gaps: bool,
}

/// What a loaded `lc_bfd` is: the embedded object's bytes and the
/// load-time switches, hashed (FNV-1a). Two engines whose identities are
/// equal run the same program; one taking over from the other may keep
/// the running program instead of loading (and verifying) its own.
pub fn identity(switches: Switches) -> Result<String, ObjectError> {
    let bytes = object()?.iter().copied().chain([
        u8::from(switches.fixed_sweep),
        u8::from(switches.unverified_auth),
        u8::from(switches.echo_unlisted),
        u8::from(switches.gtsm_first),
        u8::from(switches.no_gaps),
    ]);
    let hash = bytes.fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Ok(format!("{hash:016x}"))
}

/// [`load`] with `switches` set before the verifier sees the program.
pub fn load_with(switches: Switches) -> Result<aya::Ebpf, ObjectError> {
    load_adopting(switches, &[])
}

/// [`load_with`], the maps named in `pins` not created but taken from
/// their pins on a bpffs (a running engine's, handed over): the program
/// then shares them with the one that made them.
pub fn load_adopting(
    switches: Switches,
    pins: &[(String, std::path::PathBuf)],
) -> Result<aya::Ebpf, ObjectError> {
    use linecard_common::names;
    let values = [
        (names::FIXED_SWEEP_GLOBAL, u8::from(switches.fixed_sweep)),
        (
            names::UNVERIFIED_AUTH_GLOBAL,
            u8::from(switches.unverified_auth),
        ),
        (
            names::ECHO_UNLISTED_GLOBAL,
            u8::from(switches.echo_unlisted),
        ),
        (names::GTSM_FIRST_GLOBAL, u8::from(switches.gtsm_first)),
        (names::NO_GAPS_GLOBAL, u8::from(switches.no_gaps)),
    ];
    let mut loader = aya::EbpfLoader::new();
    for (name, value) in &values {
        // `true`: a name the object lacks is an error, not a switch that
        // silently does nothing.
        loader.override_global(name, value, true);
    }
    for (name, path) in pins {
        loader.map_pin_path(name.as_str(), path.as_path());
    }
    Ok(loader.load(object()?)?)
}

/// Checks the `LC_LAYOUT_VERSION` symbol an object carries.
pub fn check_layout(elf: &[u8]) -> Result<(), ObjectError> {
    let version = layout_version(elf)?;
    if version != linecard_common::LAYOUT_VERSION {
        return Err(ObjectError::LayoutMismatch {
            object: version,
            expected: linecard_common::LAYOUT_VERSION,
        });
    }
    Ok(())
}

/// Reads the layout version an object was built with.
pub fn layout_version(elf: &[u8]) -> Result<u32, ObjectError> {
    let at = layout_version_offset(elf)?;
    let bytes: [u8; 4] = elf[at..at + 4]
        .try_into()
        .expect("range checked by the locator");
    Ok(u32::from_le_bytes(bytes))
}

/// File offset of the `LC_LAYOUT_VERSION` value inside an object.
fn layout_version_offset(elf: &[u8]) -> Result<usize, ObjectError> {
    let bad = |why: &str| ObjectError::NoLayoutVersion(why.to_string());
    let file = object::File::parse(elf).map_err(|e| bad(&e.to_string()))?;
    let symbol = file
        .symbols()
        .find(|s| s.name() == Ok("LC_LAYOUT_VERSION"))
        .ok_or_else(|| bad("symbol missing"))?;
    let section = symbol
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .ok_or_else(|| bad("symbol has no section"))?;
    let (section_start, section_len) = section
        .file_range()
        .ok_or_else(|| bad("section has no file data"))?;
    let within = symbol
        .address()
        .checked_sub(section.address())
        .ok_or_else(|| bad("symbol before its section"))?;
    if within + 4 > section_len {
        return Err(bad("symbol outside its section"));
    }
    usize::try_from(section_start + within).map_err(|_| bad("offset overflows usize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_object_matches_layout_or_explains_why_not() {
        match object() {
            Ok(bytes) => assert!(bytes.starts_with(b"\x7fELF"), "embedded object is not ELF"),
            Err(ObjectError::BuiltWithout(reason)) => {
                assert!(
                    std::env::var_os("LINECARD_REQUIRE_EBPF").is_none(),
                    "CI requires eBPF but the object was built without it: {reason}"
                );
                eprintln!("skipped: built without eBPF: {reason}");
            }
            Err(e) => panic!("embedded object unusable: {e}"),
        }
    }

    #[test]
    fn stale_object_is_refused() {
        let Ok(bytes) = object() else {
            eprintln!("skipped: built without eBPF");
            return;
        };
        let mut stale = bytes.to_vec();
        let at = layout_version_offset(&stale).unwrap();
        stale[at..at + 4].copy_from_slice(&(linecard_common::LAYOUT_VERSION + 1).to_le_bytes());
        match check_layout(&stale) {
            Err(ObjectError::LayoutMismatch { object, expected }) => {
                assert_eq!(
                    (object, expected),
                    (expected + 1, linecard_common::LAYOUT_VERSION)
                );
            }
            other => panic!("a stale object was not refused: {other:?}"),
        }
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        assert!(matches!(
            layout_version(b"not an elf"),
            Err(ObjectError::NoLayoutVersion(_))
        ));
    }
}
