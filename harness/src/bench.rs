//! `linecard bench analyze`: the analyzer's speed and peak memory, side by
//! side in one run with what a user would otherwise use (`tshark -T
//! fields`) and with the floor (`cat FILE > /dev/null`), all pinned to one
//! CPU.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::io::{BufWriter, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub packets: u64,
    pub sessions: u32,
    /// Equal phase windows the analyzer computed beside the whole capture
    /// (each holds every flow's distributions: memory grows with them).
    pub phases: u32,
    pub capture_bytes: u64,
    pub cpu: usize,
    pub tools: Vec<ToolResult>,
    /// linecard analyze's rate divided by each other tool's.
    pub analyze_vs_cat: f64,
    pub analyze_vs_tshark: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct ToolResult {
    pub tool: String,
    pub command: String,
    /// Packets the tool processed (tshark may run on a prefix).
    pub packets: u64,
    /// Median wall time over the runs (rates derive from it).
    pub seconds: f64,
    /// Fastest run, and every run, in seconds.
    pub best_seconds: f64,
    pub runs_seconds: Vec<f64>,
    pub packets_per_second: f64,
    /// The largest peak resident set of its runs (the kernel's ru_maxrss).
    pub max_rss_kib: u64,
    pub note: Option<String>,
}

/// Where the synthetic capture's time starts.
const SYNTHETIC_START_NS: u64 = 1_764_480_000 * 1_000_000_000;

/// The synthetic capture's span: flows send in turn, one round per 10 ms.
fn synthetic_span_ns(packets: u64, sessions: u32) -> u64 {
    packets.div_ceil(u64::from(sessions) * 2) * 10_000_000
}

/// `count` equal windows over the synthetic capture, as `--phase` takes
/// them.
fn phase_args(packets: u64, sessions: u32, count: u32) -> Vec<String> {
    let span = synthetic_span_ns(packets, sessions);
    (0..u64::from(count))
        .map(|i| {
            let at = |k: u64| (SYNTHETIC_START_NS + span * k / u64::from(count)) as f64 / 1e9;
            format!("--phase=p{}={:.9},{:.9}", i + 1, at(i), at(i + 1))
        })
        .collect()
}

/// Writes a nanosecond pcap of `packets` BFD packets over `sessions` 3x10 ms
/// sessions (two flows each), Ethernet/IPv4/UDP 3784, jittered send times.
pub fn synthesize(path: &Path, packets: u64, sessions: u32) -> Result<u64> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(&0xa1b2_3c4du32.to_le_bytes())?;
    out.write_all(&[
        2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
    ])?;
    let flows = u64::from(sessions) * 2;
    let templates: Vec<Vec<u8>> = (0..flows).map(|f| frame_template(f as u32)).collect();
    let start_ns = SYNTHETIC_START_NS;
    // Flows send in turn; each flow's period is 10 ms with a deterministic
    // jitter pattern, as RFC 5880 section 6.8.7 jitter would produce.
    let slot_ns = 10_000_000 / flows;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..packets {
        let flow = (i % flows) as usize;
        let round = i / flows;
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let jitter = state % (slot_ns / 2).max(1);
        let ts = start_ns + round * 10_000_000 + flow as u64 * slot_ns + jitter;
        let t = &templates[flow];
        out.write_all(&((ts / 1_000_000_000) as u32).to_le_bytes())?;
        out.write_all(&((ts % 1_000_000_000) as u32).to_le_bytes())?;
        out.write_all(&(t.len() as u32).to_le_bytes())?;
        out.write_all(&(t.len() as u32).to_le_bytes())?;
        out.write_all(t)?;
    }
    out.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

fn frame_template(flow: u32) -> Vec<u8> {
    let session = flow / 2;
    let (src, dst) = if flow.is_multiple_of(2) {
        (1u8, 2u8)
    } else {
        (2, 1)
    };
    let mut f = vec![0x02, 0, 0, 0, 0, dst, 0x02, 0, 0, 0, 0, src, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0xc0, 0, 52, 0, 0, 0x40, 0, 255, 17, 0, 0]);
    f.extend_from_slice(&[10, (session >> 8) as u8, session as u8, src]);
    f.extend_from_slice(&[10, (session >> 8) as u8, session as u8, dst]);
    f.extend_from_slice(&(49152u16 + src as u16).to_be_bytes());
    f.extend_from_slice(&3784u16.to_be_bytes());
    f.extend_from_slice(&[0, 32, 0, 0]);
    f.extend_from_slice(&[0x20, 0xc0, 3, 24]);
    f.extend_from_slice(&(flow + 1).to_be_bytes());
    f.extend_from_slice(&(flow ^ 1).wrapping_add(1).to_be_bytes());
    f.extend_from_slice(&10_000u32.to_be_bytes());
    f.extend_from_slice(&10_000u32.to_be_bytes());
    f.extend_from_slice(&0u32.to_be_bytes());
    f
}

fn pinned(program: &str, cpu: usize) -> Command {
    let mut cmd = Command::new(program);
    // SAFETY: sched_setaffinity on the child itself, between fork and exec,
    // with a set built on the stack; async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// One run: its wall time and its peak resident set (KiB), from wait4.
fn time(cmd: &mut Command, label: &str) -> Result<(f64, u64)> {
    let started = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {label}"))?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 on our own child's PID,
    // which `Child` has not reaped (it is dropped without waiting).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above: our own unreaped child, a valid rusage.
    let reaped = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let seconds = started.elapsed().as_secs_f64();
    if reaped < 0 {
        bail!("waiting for {label}: {}", std::io::Error::last_os_error());
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{label} failed (wait status {status:#x})");
    }
    Ok((seconds, usage.ru_maxrss.max(0) as u64))
}

/// A command's `runs` runs: (median, best, all seconds; the largest peak
/// resident set in KiB).
fn time_runs(cmd: &mut Command, label: &str, runs: usize) -> Result<(f64, f64, Vec<f64>, u64)> {
    let mut all = Vec::with_capacity(runs);
    let mut rss = 0;
    for _ in 0..runs {
        let (seconds, peak) = time(cmd, label)?;
        all.push(seconds);
        rss = rss.max(peak);
    }
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    Ok((sorted[sorted.len() / 2], sorted[0], all, rss))
}

fn tool_available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

pub fn run(
    packets: u64,
    sessions: u32,
    phases: u32,
    dir: &Path,
    tshark_packets: u64,
    runs: usize,
    keep: bool,
) -> Result<BenchReport> {
    let path: PathBuf = dir.join(format!("linecard-bench-{}.pcap", std::process::id()));
    eprintln!(
        "synthesizing {packets} packets over {sessions} sessions in {}",
        path.display()
    );
    let bytes = synthesize(&path, packets, sessions)?;
    let cpu = 0;
    let mut tools = Vec::new();
    let result = (|| -> Result<()> {
        // Warm the page cache so every tool reads from memory.
        time(pinned("cat", cpu).arg(&path), "cat (warm-up)")?;
        let exe = std::env::current_exe()?;
        let exe = exe.to_str().context("executable path is not UTF-8")?;
        let path_str = path.to_str().context("capture path is not UTF-8")?;
        let (cat, best, runs_seconds, max_rss_kib) =
            time_runs(pinned("cat", cpu).arg(&path), "cat", runs)?;
        tools.push(ToolResult {
            tool: "cat".into(),
            command: format!("cat {path_str} > /dev/null"),
            packets,
            seconds: cat,
            best_seconds: best,
            runs_seconds,
            packets_per_second: packets as f64 / cat,
            max_rss_kib,
            note: None,
        });
        let mut analyze = pinned(exe, cpu);
        let windows = phase_args(packets, sessions, phases);
        analyze.args(["analyze", path_str, "--json"]).args(&windows);
        let (secs, best, runs_seconds, max_rss_kib) =
            time_runs(&mut analyze, "linecard analyze", runs)?;
        let mut shown = format!("linecard analyze {path_str} --json");
        for w in &windows {
            shown.push(' ');
            shown.push_str(w);
        }
        tools.push(ToolResult {
            tool: "linecard analyze".into(),
            command: format!("{shown} > /dev/null"),
            packets,
            seconds: secs,
            best_seconds: best,
            runs_seconds,
            packets_per_second: packets as f64 / secs,
            max_rss_kib,
            note: None,
        });
        if tshark_packets == 0 {
            eprintln!("tshark skipped (--tshark-packets 0)");
        } else if tool_available("tshark") {
            let n = tshark_packets.min(packets);
            let mut tshark = pinned("tshark", cpu);
            tshark.args(["-r", path_str, "-c", &n.to_string(), "-T", "fields"]);
            for field in [
                "frame.time_epoch",
                "ip.src",
                "udp.srcport",
                "ip.dst",
                "udp.dstport",
                "bfd.sta",
                "bfd.diag",
            ] {
                tshark.args(["-e", field]);
            }
            let (secs, max_rss_kib) = time(&mut tshark, "tshark")?;
            tools.push(ToolResult {
                best_seconds: secs,
                runs_seconds: vec![secs],
                tool: "tshark".into(),
                command: format!("tshark -r {path_str} -c {n} -T fields -e frame.time_epoch -e ip.src -e udp.srcport -e ip.dst -e udp.dstport -e bfd.sta -e bfd.diag"),
                packets: n,
                seconds: secs,
                packets_per_second: n as f64 / secs,
                max_rss_kib,
                note: (n < packets).then(|| format!("first {n} packets only (--tshark-packets)")),
            });
        } else {
            eprintln!("tshark not installed (apt-get install tshark): its row is omitted");
        }
        Ok(())
    })();
    if !keep {
        let _ = std::fs::remove_file(&path);
    }
    result?;
    let rate = |name: &str| {
        tools
            .iter()
            .find(|t| t.tool == name)
            .map(|t| t.packets_per_second)
    };
    let analyze = rate("linecard analyze").expect("linecard analyze is always measured");
    Ok(BenchReport {
        packets,
        sessions,
        phases,
        capture_bytes: bytes,
        cpu,
        analyze_vs_cat: analyze / rate("cat").expect("cat is always measured"),
        analyze_vs_tshark: rate("tshark").map(|t| analyze / t),
        tools,
    })
}

pub fn render(r: &BenchReport) -> String {
    let mut out = format!(
        "{} packets, {} sessions, {} phase windows, {:.0} MB, pinned to CPU {}\n{:<18} {:>10} {:>10} {:>14} {:>12}\n",
        r.packets,
        r.sessions,
        r.phases,
        r.capture_bytes as f64 / 1e6,
        r.cpu,
        "tool",
        "packets",
        "median s",
        "packets/s",
        "peak RSS MiB"
    );
    for t in &r.tools {
        out.push_str(&format!(
            "{:<18} {:>10} {:>10.3} {:>14.0} {:>12.1}  best {:.3} s{}\n",
            t.tool,
            t.packets,
            t.seconds,
            t.packets_per_second,
            t.max_rss_kib as f64 / 1024.0,
            t.best_seconds,
            t.note
                .as_ref()
                .map(|n| format!("  ({n})"))
                .unwrap_or_default()
        ));
    }
    out.push_str(&format!("analyze / cat: {:.3}\n", r.analyze_vs_cat));
    if let Some(x) = r.analyze_vs_tshark {
        out.push_str(&format!("analyze / tshark: {x:.1}x\n"));
    }
    out
}
