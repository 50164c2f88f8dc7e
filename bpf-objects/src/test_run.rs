//! BPF_PROG_TEST_RUN: runs a loaded program on a crafted frame in the
//! kernel, without a network, and reports the verdict, the frame as the
//! program left it, and the mean time per run.

use std::os::fd::{AsFd, AsRawFd};

/// The `test` member of `union bpf_attr` (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct TestAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

const BPF_PROG_TEST_RUN: libc::c_long = 10;

#[derive(Debug, Clone)]
pub struct TestRun {
    /// The program's return value (an `xdp_action`).
    pub action: u32,
    /// The frame after the program ran (length as the program left it).
    pub frame: Vec<u8>,
    /// Mean nanoseconds per run over `repeat` runs, as the kernel measured.
    pub mean_ns: u32,
}

/// Runs `program` on `frame` `repeat` times (at least 1).
pub fn run(program: &aya::programs::Xdp, frame: &[u8], repeat: u32) -> std::io::Result<TestRun> {
    let fd = program.fd().map_err(std::io::Error::other)?;
    let mut out = vec![0u8; frame.len() + 256];
    let mut attr = TestAttr {
        prog_fd: fd.as_fd().as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_size_out: out.len() as u32,
        data_in: frame.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: repeat.max(1),
        ..TestAttr::default()
    };
    // SAFETY: the attr points at live buffers with their true sizes; the
    // kernel writes at most data_size_out bytes into `out`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut TestAttr,
            std::mem::size_of::<TestAttr>() as u32,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    out.truncate(attr.data_size_out as usize);
    Ok(TestRun {
        action: attr.retval,
        frame: out,
        mean_ns: attr.duration,
    })
}

/// Whether this process may load programs and run them: root. Without
/// root, a printed skip; under `LINECARD_REQUIRE_PRIVILEGED=1` (CI) a
/// panic, since a skipped test is not a passed one.
pub fn privileged(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var_os("LINECARD_REQUIRE_PRIVILEGED").is_none_or(|v| v != "1"),
        "{test}: LINECARD_REQUIRE_PRIVILEGED=1 but not running as root"
    );
    eprintln!("skipped {test}: BPF_PROG_TEST_RUN needs root");
    false
}

/// `lc_bfd` loaded and verified with one session (`OUR_DISCR`) in its
/// map: what every BPF_PROG_TEST_RUN test of the fast path starts from.
pub struct Loaded {
    pub bpf: aya::Ebpf,
}

impl Loaded {
    /// With load-time `switches` (the negative controls) set.
    pub fn new(config: linecard_common::bfd::SessionConfig, switches: crate::Switches) -> Self {
        use aya::maps::{HashMap, MapData};
        use linecard_common::{bfd::SessionConfig, names};
        let mut bpf = crate::load_with(switches).expect("loading the XDP object");
        let program: &mut aya::programs::Xdp = bpf
            .program_mut(names::BFD_PROGRAM)
            .expect("lc_bfd in the object")
            .try_into()
            .expect("an XDP program");
        program.load().expect("the verifier accepts lc_bfd");
        let mut sessions: HashMap<&mut MapData, u32, SessionConfig> =
            HashMap::try_from(bpf.map_mut(names::SESSIONS_MAP).expect("LC_SESSIONS"))
                .expect("a hash map");
        sessions
            .insert(crate::craft::OUR_DISCR, config, 0)
            .expect("writing the session");
        Self { bpf }
    }

    /// Installs key `id` of the session.
    pub fn install_key(&mut self, id: u8, secret: &[u8]) {
        use aya::maps::{HashMap, MapData};
        use linecard_common::bfd::{AuthKeyRef, AuthSecret};
        let mut keys: HashMap<&mut MapData, AuthKeyRef, AuthSecret> = HashMap::try_from(
            self.bpf
                .map_mut(linecard_common::names::AUTH_KEYS_MAP)
                .expect("LC_AUTH_KEYS"),
        )
        .expect("a hash map");
        let (key, value) = crate::craft::auth_key(id, secret);
        keys.insert(key, value, 0).expect("writing the key");
    }

    pub fn run(&self, frame: &[u8]) -> TestRun {
        let program: &aya::programs::Xdp = self
            .bpf
            .program(linecard_common::names::BFD_PROGRAM)
            .expect("lc_bfd")
            .try_into()
            .expect("an XDP program");
        run(program, frame, 1).expect("BPF_PROG_TEST_RUN")
    }

    /// The sum over CPUs of a per-CPU counter.
    pub fn per_cpu_sum(&self, map: &str, index: u32) -> u64 {
        let counters: aya::maps::PerCpuArray<&aya::maps::MapData, u64> =
            aya::maps::PerCpuArray::try_from(self.bpf.map(map).expect("the map"))
                .expect("a per-CPU array");
        counters.get(&index, 0).expect("the counter").iter().sum()
    }

    /// The kernel's state of the session (`LC_STATE` at `craft::SLOT`).
    pub fn state(&self) -> linecard_common::bfd::SessionState {
        self.get(linecard_common::names::STATE_MAP, crate::craft::SLOT)
    }

    /// Sets when our last reply left (CLOCK_MONOTONIC ns).
    pub fn our_last_packet_at(&mut self, last_tx_ns: u64) {
        let state = linecard_common::bfd::SessionState {
            last_tx_ns,
            ..self.state()
        };
        self.set(linecard_common::names::STATE_MAP, crate::craft::SLOT, state);
    }

    /// Forgets our last packet, as if an interval had passed since it:
    /// the next periodic packet of the peer is answered (RFC 5880 6.8.7
    /// allows none sooner than 75 % of one).
    pub fn an_interval_later(&mut self) {
        self.our_last_packet_at(0);
    }

    /// Element `slot` of array `map`.
    pub fn get<T: aya::Pod>(&self, map: &str, slot: u32) -> T {
        let array: aya::maps::Array<&aya::maps::MapData, T> =
            aya::maps::Array::try_from(self.bpf.map(map).expect("the map")).expect("an array");
        array.get(&slot, 0).expect("the element")
    }

    /// Sets element `slot` of array `map`.
    pub fn set<T: aya::Pod>(&mut self, map: &str, slot: u32, value: T) {
        let mut array: aya::maps::Array<&mut aya::maps::MapData, T> =
            aya::maps::Array::try_from(self.bpf.map_mut(map).expect("the map")).expect("an array");
        array.set(slot, value, 0).expect("writing the element");
    }
}

/// CLOCK_MONOTONIC now, ns: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
