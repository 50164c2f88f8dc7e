//! `linecard bench metrics`: what scraping linecardd's metrics endpoint
//! once a second costs the engine (issue 41's budget: at most 1 % of a CPU
//! at 1024 sessions). One linecardd with N sessions (naive backend, on
//! loopback, to peers nobody answers: Down sessions are encoded in full
//! all the same), then pairs of equal windows, unscraped and scraped at 1
//! Hz, the engine's CPU time read from `/proc/PID/stat` around each: the
//! cost is the difference, measured side by side in one run. The scrapes
//! are `crate::scrape`'s HTTP GETs, as Prometheus would make them.

use anyhow::{bail, Context, Result};
use linecard_api::config::{ConfigFile, EngineSettings};
use linecard_api::BackendKind;
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One pair of windows.
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    /// The engine's CPU time per second of window, ms, unscraped and
    /// scraped once a second.
    pub idle_cpu_ms_per_s: f64,
    pub scraped_cpu_ms_per_s: f64,
    /// The scraped window's extra, in % of one CPU.
    pub cost_percent: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `linecardd --version` of the engine measured (its build profile
    /// matters: a debug build costs several times a release one).
    pub engine: String,
    pub sessions: usize,
    pub seconds: u64,
    pub pairs: Vec<Pair>,
    /// The median scrape as the client saw it (request to last byte), ms,
    /// and the largest.
    pub scrape_ms_p50: f64,
    pub scrape_ms_max: f64,
    /// The exposition's size, bytes.
    pub bytes: usize,
    /// The budget the cost is held to, % of one CPU.
    pub budget_percent: f64,
}

/// The engine's user + system CPU time so far, clock ticks (10 ms).
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command's closing parenthesis: utime and stime are
    // the 12th and 13th of them (proc(5)'s 14th and 15th).
    let rest = stat.rsplit_once(')').context("a /proc stat line")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .context("a short /proc stat line")?
            .parse()
            .context("a /proc stat field")
    };
    Ok(field(11)? + field(12)?)
}

/// A free port on loopback (bound and released: the engine binds it next).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// The engine under test, stopped (by its PID) when dropped.
struct Engine(Child);

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: a signal to the child this bench started.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the bench in `dir` (the config, socket and log).
pub fn run(sessions: usize, seconds: u64, pairs: usize, dir: &Path) -> Result<Report> {
    if sessions == 0 || sessions > 4096 {
        bail!("--sessions {sessions}: 1 to 4096");
    }
    std::fs::create_dir_all(dir)?;
    let version = Command::new(crate::linecardd::binary())
        .arg("--version")
        .output()
        .context("linecardd --version")?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
    let engine = EngineSettings {
        control_socket: Some(dir.join("linecardd.sock")),
        metrics: Some(address.to_string()),
        ..EngineSettings::default()
    };
    let session = (0..sessions)
        .map(|i| {
            let peer = Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 1) as u8);
            crate::linecardd::session_settings(
                &Ipv4Addr::LOCALHOST,
                &peer,
                (1000, 1000, 3),
                BackendKind::Naive,
            )
        })
        .collect();
    let config = dir.join("linecardd.toml");
    std::fs::write(&config, toml::to_string(&ConfigFile { engine, session })?)?;
    let log = std::fs::File::create(dir.join("linecardd.log"))?;
    let child = Command::new(crate::linecardd::binary())
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting linecardd")?;
    let engine = Engine(child);
    let pid = engine.0.id();
    // Ready when the endpoint answers with every session.
    let deadline = Instant::now() + Duration::from_secs(30);
    let bytes = loop {
        if let Ok(text) = crate::scrape::fetch(address) {
            if crate::scrape::parse(&text).len() == sessions {
                break text.len();
            }
        }
        if Instant::now() > deadline {
            bail!(
                "linecardd did not serve {sessions} sessions on {address} within 30 s (see {})",
                dir.join("linecardd.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let window = Duration::from_secs(seconds);
    let mut scrapes_ms = Vec::new();
    let mut results = Vec::new();
    for _ in 0..pairs {
        let before = cpu_ticks(pid)?;
        std::thread::sleep(window);
        let idle = cpu_ticks(pid)? - before;
        let before = cpu_ticks(pid)?;
        let start = Instant::now();
        for k in 0..seconds {
            let due = start + Duration::from_secs(k);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let t = Instant::now();
            crate::scrape::fetch(address)?;
            scrapes_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        std::thread::sleep((start + window).saturating_duration_since(Instant::now()));
        let scraped = cpu_ticks(pid)? - before;
        // 10 ms ticks over the window, as ms of CPU per second.
        let per_s = |ticks: u64| ticks as f64 * 10.0 / seconds as f64;
        results.push(Pair {
            idle_cpu_ms_per_s: per_s(idle),
            scraped_cpu_ms_per_s: per_s(scraped),
            cost_percent: (per_s(scraped) - per_s(idle)) / 10.0,
        });
    }
    drop(engine);
    scrapes_ms.sort_by(f64::total_cmp);
    Ok(Report {
        engine: version,
        sessions,
        seconds,
        pairs: results,
        scrape_ms_p50: scrapes_ms.get(scrapes_ms.len() / 2).copied().unwrap_or(0.0),
        scrape_ms_max: scrapes_ms.last().copied().unwrap_or(0.0),
        bytes,
        budget_percent: 1.0,
    })
}

/// The report for people.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "{}, {} sessions (naive, loopback), its metrics endpoint scraped once a second for {} s against {} s unscraped, side by side:\n",
        r.engine, r.sessions, r.seconds, r.seconds
    );
    for (i, p) in r.pairs.iter().enumerate() {
        out.push_str(&format!(
            "pair {}: engine CPU {:.1} ms/s unscraped, {:.1} ms/s scraped: {:+.2} % of a CPU\n",
            i + 1,
            p.idle_cpu_ms_per_s,
            p.scraped_cpu_ms_per_s,
            p.cost_percent
        ));
    }
    out.push_str(&format!(
        "a scrape: {:.1} MB, {:.1} ms median, {:.1} ms at most (as the client saw it)\nbudget: at most {:.0} % of a CPU\n",
        r.bytes as f64 / 1e6,
        r.scrape_ms_p50,
        r.scrape_ms_max,
        r.budget_percent
    ));
    out
}
