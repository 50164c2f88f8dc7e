//! Debian's `prometheus`, started by a test in the DUT's namespace to
//! scrape a lab linecardd, and asked over its HTTP API with curl.

use linecard_harness::lab::spec::{self, DUT};
use linecard_harness::procs::Daemon;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where Prometheus answers queries, on the DUT namespace's loopback.
pub const PROMETHEUS: &str = "127.0.0.1:19790";

/// `curl -s ARGS` in the DUT's namespace: its output.
pub fn curl(args: &[&str]) -> String {
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            DUT.namespace,
            "curl",
            "-s",
            "--max-time",
            "5",
        ])
        .args(args)
        .output()
        .expect("curl (apt-get install curl)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Prometheus scraping `target` (ADDRESS:PORT) every second, exemplars
/// kept, its data under `dir`.
pub fn start_prometheus(dir: &Path, target: &str) -> Daemon {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: linecardd\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    Daemon::spawn(
        "prometheus",
        DUT.namespace,
        Some(&spec::cpuset_dir(spec::REST_CPUSET)),
        "prometheus",
        &[
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
            format!("--web.listen-address={PROMETHEUS}"),
            // The window's largest gap is an exemplar (OpenMetrics).
            "--enable-feature=exemplar-storage".to_string(),
        ],
        &dir.join("prometheus.log"),
    )
    .expect("prometheus (apt-get install prometheus)")
}

/// `GET /api/v1/PATH` with `params` (url-encoded): the reply's `data`.
pub fn api(path: &str, params: &[(&str, String)]) -> Option<serde_json::Value> {
    let mut args = vec![
        "-G".to_string(),
        format!("http://{PROMETHEUS}/api/v1/{path}"),
    ];
    for (key, value) in params {
        args.extend(["--data-urlencode".to_string(), format!("{key}={value}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let reply: serde_json::Value = serde_json::from_str(&curl(&args)).ok()?;
    Some(reply["data"].clone())
}

/// Prometheus's instant value of `query` (its first series), or `None`
/// if it has none yet.
pub fn instant(query: &str) -> Option<f64> {
    let data = api("query", &[("query", query.to_string())])?;
    data["result"].as_array()?.first()?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

/// Waits (bounded) until Prometheus's `query` is `want`.
pub fn wait_prometheus(query: &str, want: f64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let got = instant(query);
        if got == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus: {query} is {got:?}, not {want}, after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
