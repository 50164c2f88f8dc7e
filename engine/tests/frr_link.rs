//! linecardd's side of FRR's dataplane protocol against a listener that
//! speaks it byte by byte, on loopback. The real bfdd runs in the
//! harness's tests (`harness/tests/lab/frr_dataplane.rs`); this one exists for
//! what the real bfdd never does: send garbage. It checks that a malformed
//! stream ends the connection (never a resynchronisation), that hold mode
//! then keeps the session and reconnects, and that counters requests are
//! answered with their own id.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
use linecard_engine::bfddp::{Framer, Message, SessionMsg};
use linecard_engine::config::EngineConfig;
use linecard_engine::daemon::Engine;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads messages until `want` matches one (bounded).
fn expect(stream: &mut TcpStream, framer: &mut Framer, want: impl Fn(&Message) -> bool) -> Message {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 1024];
    loop {
        while let Some(m) = framer
            .next_message()
            .expect("linecardd sends well-formed messages")
        {
            if want(&m) {
                return m;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no expected message from linecardd"
        );
        match stream.read(&mut buf) {
            Ok(0) => panic!("linecardd closed the connection"),
            Ok(n) => {
                framer.push(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("reading from linecardd: {e}"),
        }
    }
}

fn accept(listener: &TcpListener) -> (TcpStream, Framer) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                return (stream, Framer::default());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "linecardd never connected");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn add(lid: u32) -> Message {
    Message::AddSession(SessionMsg {
        flags: 0,
        src: Some("127.0.0.1".parse().unwrap()),
        dst: "127.0.0.2".parse().unwrap(),
        lid,
        min_tx_us: 300_000,
        min_rx_us: 300_000,
        min_echo_tx_us: 50_000,
        min_echo_rx_us: 50_000,
        hold_time_ms: 0,
        ttl: 255,
        detect_mult: 3,
        ifindex: 0,
        ifname: Vec::new(),
    })
}

#[test]
fn garbage_drops_the_connection_and_hold_mode_reconnects_keeping_the_session() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let dir = std::env::temp_dir().join(format!("linecard-frr-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = EngineConfig::parse(
        "test.toml",
        &format!(
            "[engine]\ncontrol_socket = \"{}\"\nfrr_dataplane = \"{}\"\nfrr_backend = \"naive\"\nfrr_hold_seconds = 5\n",
            dir.join("ctl.sock").display(),
            listener.local_addr().unwrap()
        ),
    )
    .unwrap();
    let signals = Arc::new(linecard_engine::daemon::Signals::new());
    let engine_signals = signals.clone();
    // The engine lives on its own thread (it is not Send: built there).
    let loop_thread = std::thread::spawn(move || {
        // A port of our own: the test must not need the BFD port free.
        let port = 40_000 + (std::process::id() % 20_000) as u16;
        let mut engine = Engine::with_port(config, port).unwrap();
        engine.run(&engine_signals).unwrap();
        engine.session_count()
    });

    let (mut bfdd, mut framer) = accept(&listener);
    bfdd.write_all(&add(0x0a0b_0c0d).to_bytes()).unwrap();
    // bfdd reset its view to Down on registering: we say where we are.
    let report = expect(&mut bfdd, &mut framer, |m| {
        matches!(m, Message::StateChange(_))
    });
    let Message::StateChange(change) = report else {
        unreachable!()
    };
    assert_eq!((change.lid, change.state), (0x0a0b_0c0d, 1), "{change:?}");
    // Counters: the reply carries the request's id, whatever the lid.
    for (id, lid) in [(7u16, 0x0a0b_0c0du32), (8, 0xdead)] {
        bfdd.write_all(&Message::RequestCounters { id, lid }.to_bytes())
            .unwrap();
        let reply = expect(&mut bfdd, &mut framer, |m| {
            matches!(m, Message::Counters { .. })
        });
        let Message::Counters { id: got, counters } = reply else {
            unreachable!()
        };
        assert_eq!((got, counters.lid), (id, lid));
    }
    // The keepalive arrives on its own.
    expect(&mut bfdd, &mut framer, |m| {
        matches!(m, Message::EchoRequest { .. })
    });

    // Garbage: a bad version, then a well-formed counters request that must
    // never be answered (no resynchronisation after garbage).
    let mut garbage = vec![9, 0, 0, 5, 0, 1, 0, 12, 0, 0, 0, 0];
    garbage.extend(Message::RequestCounters { id: 99, lid: 1 }.to_bytes());
    bfdd.write_all(&garbage).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut buf = [0u8; 1024];
    loop {
        match bfdd.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                framer.push(&buf[..n]);
                while let Some(m) = framer.next_message().unwrap() {
                    assert!(
                        !matches!(m, Message::Counters { id: 99, .. }),
                        "linecardd answered a message that followed garbage"
                    );
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading from linecardd: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "linecardd kept a connection that sent garbage"
        );
    }

    // Hold mode: linecardd comes back, and the re-added session (new lid,
    // same addresses) is the one it kept.
    let (mut bfdd, mut framer) = accept(&listener);
    bfdd.write_all(&add(0x0102_0304).to_bytes()).unwrap();
    let report = expect(&mut bfdd, &mut framer, |m| {
        matches!(m, Message::StateChange(_))
    });
    let Message::StateChange(change) = report else {
        unreachable!()
    };
    assert_eq!(change.lid, 0x0102_0304);
    // After the adoption grace period the session is still there.
    std::thread::sleep(Duration::from_millis(3_500));
    signals.stop.store(true, Ordering::Relaxed);
    let sessions = loop_thread.join().unwrap();
    assert_eq!(sessions, 1, "the held session was swept or duplicated");
    let _ = std::fs::remove_dir_all(&dir);
}
