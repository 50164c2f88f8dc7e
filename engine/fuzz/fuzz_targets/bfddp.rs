//! Any byte stream from "bfdd", cut at fuzzer-chosen points: the framer
//! never panics, never wedges (each call consumes or stops), stays failed
//! after an error, and every message it yields re-encodes to bytes that
//! parse to the same message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_engine::bfddp::{Framer, Message};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size, as a socket would split them.
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(cut).max(1);
    let mut framer = Framer::default();
    let mut failed = None;
    for piece in stream.chunks(chunk) {
        framer.push(piece);
        loop {
            match framer.next_message() {
                Ok(Some(message)) => {
                    assert!(failed.is_none(), "a message after a framing error");
                    let bytes = message.to_bytes();
                    let again = Message::parse(&bytes).expect("emitted messages parse");
                    assert_eq!(again, Some(message));
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(failed.is_none_or(|f| f == e), "the error changed");
                    failed = Some(e);
                    break;
                }
            }
        }
    }
});
