//! `lc_loss`, the lab's lossy link, on crafted frames with
//! BPF_PROG_TEST_RUN: BFD control frames dropped at exactly the draws of
//! its seed (the same xorshift computed here), everything else passed.
//! Needs root; without it, a printed skip (a failure under
//! LINECARD_REQUIRE_PRIVILEGED=1).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
use aya::maps::{Array, MapData, PerCpuArray};
use aya::programs::Xdp;
use linecard_bpf_objects::craft::{bfd, frame, frame6, frame_to};
use linecard_bpf_objects::test_run;
use linecard_common::loss::{counter, next, LossConfig};
use linecard_common::names;

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;

struct Loss {
    bpf: aya::Ebpf,
}

impl Loss {
    fn load(config: LossConfig) -> Self {
        let mut bpf = linecard_bpf_objects::load().expect("loading the XDP object");
        let program: &mut Xdp = bpf
            .program_mut(names::LOSS_PROGRAM)
            .unwrap()
            .try_into()
            .unwrap();
        program.load().expect("the verifier accepts lc_loss");
        let mut map: Array<&mut MapData, LossConfig> =
            Array::try_from(bpf.map_mut(names::LOSS_MAP).unwrap()).unwrap();
        map.set(0, config, 0).unwrap();
        Self { bpf }
    }

    fn run(&self, frame: &[u8], repeat: u32) -> u32 {
        let program: &Xdp = self
            .bpf
            .program(names::LOSS_PROGRAM)
            .unwrap()
            .try_into()
            .unwrap();
        test_run::run(program, frame, repeat).unwrap().action
    }

    fn count(&self, index: u32) -> u64 {
        let counts: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.bpf.map(names::LOSS_COUNTS_MAP).unwrap()).unwrap();
        counts.get(&index, 0).unwrap().iter().sum()
    }
}

#[test]
fn bfd_frames_are_dropped_at_the_seeds_draws_and_nothing_else_is() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let up = bfd(3, 0, 1, 2);
    // Everything dropped: single-hop, multihop, IPv6.
    let all = Loss::load(LossConfig::new(1.0, 1));
    assert_eq!(all.run(&frame(255, &up), 1), XDP_DROP);
    assert_eq!(all.run(&frame_to(4784, 255, &up), 1), XDP_DROP);
    assert_eq!(all.run(&frame6(255, 17, &up), 1), XDP_DROP);
    // Not BFD control: echo (3785), another UDP port, a non-UDP IPv6
    // next header, ARP. Passed and not counted.
    assert_eq!(all.run(&frame_to(3785, 255, &up), 1), XDP_PASS);
    assert_eq!(all.run(&frame_to(53, 64, &up), 1), XDP_PASS);
    assert_eq!(all.run(&frame6(255, 58, &up), 1), XDP_PASS);
    let mut arp = frame(255, &up);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(all.run(&arp, 1), XDP_PASS);
    assert_eq!(
        (all.count(counter::SEEN), all.count(counter::DROPPED)),
        (3, 3)
    );

    // 30 %, seed 42, 20 000 frames: exactly the drops the same draw makes
    // here (one CPU runs a test run, so nothing races the state).
    let config = LossConfig::new(0.3, 42);
    let lossy = Loss::load(config);
    let frames = 20_000;
    lossy.run(&frame(255, &up), frames);
    let mut state = config.state;
    let expected = (0..frames)
        .filter(|_| {
            state = next(state);
            ((state >> 32) as u32) < config.threshold
        })
        .count() as u64;
    assert_eq!(lossy.count(counter::SEEN), u64::from(frames));
    assert_eq!(lossy.count(counter::DROPPED), expected);
    assert!((5_700..=6_300).contains(&expected), "{expected} of 20000");

    // 0 %: nothing dropped, everything counted.
    let none = Loss::load(LossConfig::new(0.0, 3));
    assert_eq!(none.run(&frame(255, &up), 100), XDP_PASS);
    assert_eq!(
        (none.count(counter::SEEN), none.count(counter::DROPPED)),
        (100, 0)
    );
}
