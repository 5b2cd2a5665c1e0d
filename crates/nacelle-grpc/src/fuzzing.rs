//! The gRPC frame decoder as the fuzz targets (`fuzz/`, `crates/nacelle-fuzzing`) drive it,
//! exposed only with the `fuzzing` feature. Takes arbitrary bytes and must never panic.

use bytes::Bytes;

use crate::codec::{self, Decoder};

/// Largest message the fuzzed decoder accepts (small, so oversize refusals are reached).
const MAX_MESSAGE: usize = 64 * 1024;

/// Feeds `data` to a [`Decoder`] as DATA frames (the first byte chooses the frame size,
/// so messages split across frames and frames holding several messages both occur) and
/// reads every message out. Each decoded message must encode back to a frame that decodes
/// to the same message. Returns how many messages were decoded.
pub fn frames(data: &[u8]) -> usize {
    let Some((first, rest)) = data.split_first() else {
        return 0;
    };
    let chunk = usize::from(*first).max(1);
    let mut decoder = Decoder::new(MAX_MESSAGE);
    let mut decoded = 0;
    for frame in rest.chunks(chunk) {
        decoder.push(Bytes::copy_from_slice(frame));
        loop {
            match decoder.next() {
                Ok(Some(payload)) => {
                    decoded += 1;
                    let mut again = Decoder::new(usize::MAX);
                    again.push(codec::encode(&payload));
                    assert_eq!(again.next(), Ok(Some(payload)), "re-encoded message");
                }
                Ok(None) => break,
                // The call ends with this status; nothing more is read.
                Err(_) => return decoded,
            }
        }
    }
    decoded
}
