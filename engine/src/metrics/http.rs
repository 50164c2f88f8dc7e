//! The endpoint's HTTP: one request per connection, `GET /metrics`
//! answered with OpenMetrics text, anything else with 404, a request that
//! does not arrive within a second dropped. Enough for Prometheus and
//! curl, and nothing a scraper can hold open against the next scrape.

use super::{KernelMaps, ScrapeSide};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// The longest request head read (Prometheus sends a few hundred bytes).
const HEAD_LIMIT: usize = 8192;
/// How long a scrape waits for the loop's snapshot. A loop that cannot
/// answer in this long is itself the news: the scrape fails (503).
const LOOP_WAIT: Duration = Duration::from_secs(2);

pub(super) fn serve(
    listener: &TcpListener,
    scrape: &ScrapeSide,
    mut kernel: Option<&mut KernelMaps>,
) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = answer(stream, scrape, kernel.as_deref_mut());
    }
}

fn answer(
    mut stream: TcpStream,
    scrape: &ScrapeSide,
    kernel: Option<&mut KernelMaps>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let Some(head) = read_head(&mut stream)? else {
        respond(
            &mut stream,
            "400 Bad Request",
            "text/plain",
            "bad request\n",
        )?;
        // Unread bytes at close would reset the connection and lose the
        // answer: read what is left, briefly and bounded.
        stream.shutdown(std::net::Shutdown::Write)?;
        stream.set_read_timeout(Some(Duration::from_millis(100)))?;
        let _ = std::io::copy(&mut (&stream).take(1 << 16), &mut std::io::sink());
        return Ok(());
    };
    let request_line = head.lines().next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next(), parts.next());
    if method != Some("GET") || !matches!(target, Some("/metrics") | Some("/")) {
        return respond(&mut stream, "404 Not Found", "text/plain", "GET /metrics\n");
    }
    let Some(snapshot) = scrape.snapshot(LOOP_WAIT) else {
        return respond(
            &mut stream,
            "503 Service Unavailable",
            "text/plain",
            "the engine's loop did not answer within 2 s\n",
        );
    };
    let body = super::encode(&snapshot, kernel);
    respond(
        &mut stream,
        "200 OK",
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
        &body,
    )
}

/// The request's head, up to the blank line (`None`: none came, or it was
/// too long or not UTF-8).
fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = match stream.read(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        };
        head.extend_from_slice(&buf[..n]);
        if head.len() > HEAD_LIMIT {
            return Ok(None);
        }
    }
    Ok(String::from_utf8(head).ok())
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::super::{start, Snapshot};
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// One request's whole answer from an endpoint on loopback.
    fn ask(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(request).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn a_scrape_gets_the_loop_s_snapshot_and_anything_else_a_clear_refusal() {
        // Port 0: the kernel picks; read it back from a probe bind.
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let loop_side = start(addr, None).unwrap();
        // The loop's part, on a thread of the test: answer each wake.
        std::thread::spawn(move || loop {
            let mut fd = libc::pollfd {
                fd: loop_side.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd of ours, 1 s timeout.
            unsafe { libc::poll(&mut fd, 1, 1000) };
            loop_side.serve(Snapshot::default);
        });
        let scraped = ask(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(scraped.starts_with("HTTP/1.1 200 OK\r\n"), "{scraped}");
        assert!(
            scraped.contains("application/openmetrics-text"),
            "{scraped}"
        );
        assert!(scraped.ends_with("# EOF\n"), "{scraped}");
        let other = ask(addr, b"GET /admin HTTP/1.1\r\n\r\n");
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
        let posted = ask(addr, b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(posted.starts_with("HTTP/1.1 404"), "{posted}");
        // A head past the limit is refused without waiting for its end.
        let flood = vec![b'a'; super::HEAD_LIMIT + 2048];
        let flooded = ask(addr, &flood);
        assert!(
            flooded.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{flooded}"
        );
        // And the endpoint still serves.
        assert!(ask(addr, b"GET /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200"));
    }
}
