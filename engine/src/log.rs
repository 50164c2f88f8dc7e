//! linecardd's log: one timestamped line on stderr per event. A write
//! that fails (stderr closed, a pipe whose reader went away, a full disk)
//! is dropped, never fatal: `eprintln!` would panic on EPIPE, and a
//! daemon that dies of its log sends no AdminDown (RFC 5880 6.8.16) and
//! leaves its peer to detect a false outage.

use std::io::Write;

/// Writes `text` as one line, prefixed with the Unix time in microseconds.
pub fn line(text: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}.{:06} linecardd: {text}",
        now.as_secs(),
        now.subsec_micros()
    );
}

#[cfg(test)]
mod tests {
    /// A closed stderr (a vanished SSH channel) costs a line, not the
    /// daemon: run in a child process whose stderr is a pipe already
    /// closed at the reader's end.
    #[test]
    fn a_log_line_to_a_closed_pipe_is_dropped_not_fatal() {
        if std::env::var_os("LC_LOG_CHILD").is_some() {
            // SAFETY: ignoring SIGPIPE, as Rust's runtime does for main.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
            for _ in 0..3 {
                super::line("a line nobody reads");
            }
            std::process::exit(7);
        }
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "log::tests::a_log_line_to_a_closed_pipe_is_dropped_not_fatal",
                "--nocapture",
            ])
            .env("LC_LOG_CHILD", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stderr.take());
        assert_eq!(
            child.wait().unwrap().code(),
            Some(7),
            "the logger died of its log"
        );
    }
}
