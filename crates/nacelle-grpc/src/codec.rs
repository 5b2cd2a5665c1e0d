//! gRPC message framing over HTTP/2 DATA frames, and the gRPC status carried in trailers.
//!
//! A gRPC message on the wire is a 5-byte prefix — one compression flag byte, then the
//! length as a big-endian `u32` — followed by the protobuf bytes. Messages may span DATA
//! frames and one DATA frame may carry several messages; [`Decoder`] reassembles them,
//! copying only when a message really is split across frames.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue};
use nacelle_proto::Payload;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use prost::Message;

/// Length of the message prefix.
const PREFIX: usize = 5;

/// gRPC status codes this server answers with (the numbering of the gRPC specification).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Code {
    Ok = 0,
    Cancelled = 1,
    ResourceExhausted = 8,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
}

/// A gRPC status: what the trailers of a call say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub code: Code,
    pub message: String,
}

impl Status {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
        }
    }

    pub fn ok() -> Self {
        Status::new(Code::Ok, "")
    }

    /// `grpc-status` and, when there is a message, `grpc-message` (percent-encoded as the
    /// specification asks), added to `headers`.
    pub fn write_to(&self, headers: &mut HeaderMap) {
        headers.insert("grpc-status", HeaderValue::from(self.code as u8 as u16));
        if !self.message.is_empty() {
            let encoded = utf8_percent_encode(&self.message, GRPC_MESSAGE).to_string();
            if let Ok(v) = HeaderValue::from_str(&encoded) {
                headers.insert("grpc-message", v);
            }
        }
    }

    /// The trailers that end a call with this status.
    pub fn trailers(&self) -> HeaderMap {
        let mut h = HeaderMap::with_capacity(2);
        self.write_to(&mut h);
        h
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

/// What `grpc-message` must percent-encode: controls, `%`, and everything outside
/// printable ASCII (the `CONTROLS` set covers bytes ≥ 0x80 too).
const GRPC_MESSAGE: &AsciiSet = &CONTROLS.add(b'%');

/// Frames one message: prefix plus protobuf, in a buffer of exactly that size.
pub(crate) fn encode(p: &Payload) -> Bytes {
    let len = p.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX + len);
    buf.put_u8(0);
    // A Payload over 4 GiB cannot be built from our inputs (content is limited far below).
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // `encode` only fails when the buffer is too small, and it has exactly `len` left.
    if let Err(e) = p.encode(&mut buf) {
        tracing::error!(error = %e, "cannot encode a gRPC payload");
    }
    buf.freeze()
}

/// Reassembles messages from the DATA frames of one request stream.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// Bytes of an incomplete message, when one is split across frames.
    partial: BytesMut,
    /// The frame being consumed.
    current: Bytes,
    max_message: usize,
}

impl Decoder {
    pub fn new(max_message: usize) -> Self {
        Decoder {
            partial: BytesMut::new(),
            current: Bytes::new(),
            max_message,
        }
    }

    /// Adds a DATA frame. Call [`Decoder::next`] until it returns `Ok(None)` first.
    pub fn push(&mut self, chunk: Bytes) {
        if self.current.is_empty() {
            self.current = chunk;
        } else {
            self.partial.extend_from_slice(&self.current);
            self.current = chunk;
        }
    }

    /// Whether bytes of an unfinished message are held.
    pub fn has_partial(&self) -> bool {
        !self.partial.is_empty() || !self.current.is_empty()
    }

    /// The next complete message, `Ok(None)` when more data is needed, or the status to end
    /// the call with (oversized, compressed or unparsable message).
    pub fn next(&mut self) -> Result<Option<Payload>, Status> {
        self.next_raw()?.map(decode).transpose()
    }

    /// The bytes of the next complete message (without its prefix), `Ok(None)` when more
    /// data is needed, or the status to end the call with (oversized or compressed).
    pub fn next_raw(&mut self) -> Result<Option<Bytes>, Status> {
        if self.partial.is_empty() {
            // Fast path: a whole message inside the current frame, no copy.
            match self.header_of(&self.current)? {
                Some(len) if self.current.len() >= PREFIX + len => {
                    self.current.advance(PREFIX);
                    return Ok(Some(self.current.split_to(len)));
                }
                _ => {
                    if self.current.is_empty() {
                        // An empty slice still holds the frame's allocation (the
                        // connection's read buffer of that moment): let it go, so that an
                        // idle stream pins no read buffer.
                        self.current = Bytes::new();
                        return Ok(None);
                    }
                    // Keep the start of a split message aside.
                    self.partial.extend_from_slice(&self.current);
                    self.current = Bytes::new();
                }
            }
        }
        // Slow path: complete `partial` from `current`.
        loop {
            let need = match self.header_of(&self.partial)? {
                Some(len) => PREFIX + len,
                None => PREFIX,
            };
            if self.partial.len() < need {
                if self.current.is_empty() {
                    return Ok(None);
                }
                // One allocation for the whole message once its length is known.
                self.partial.reserve(need - self.partial.len());
                let take = (need - self.partial.len()).min(self.current.len());
                self.partial.extend_from_slice(&self.current.split_to(take));
                continue;
            }
            let mut whole = self.partial.split_to(need);
            whole.advance(PREFIX);
            // Give back the memory of a large message at once.
            if self.partial.is_empty() {
                self.partial = BytesMut::new();
            }
            return Ok(Some(whole.freeze()));
        }
    }

    /// The length announced by a prefix at the start of `buf`, once the prefix is complete.
    fn header_of(&self, buf: &[u8]) -> Result<Option<usize>, Status> {
        if buf.len() < PREFIX {
            return Ok(None);
        }
        if buf[0] != 0 {
            return Err(Status::new(
                Code::Unimplemented,
                "compressed messages are not supported (grpc-encoding identity only)",
            ));
        }
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        if len > self.max_message {
            return Err(Status::new(
                Code::ResourceExhausted,
                format!(
                    "gRPC message exceeds maximum size {}: {}",
                    self.max_message, len
                ),
            ));
        }
        Ok(Some(len))
    }
}

pub(crate) fn decode(msg: Bytes) -> Result<Payload, Status> {
    Payload::decode(msg).map_err(|e| {
        Status::new(
            Code::Internal,
            format!("cannot decode the Payload message: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Payload {
        Payload::new("HealthCheckRequest", Bytes::from(vec![b'x'; n]))
    }

    #[test]
    fn whole_split_and_coalesced_messages_decode() {
        let a = encode(&sample(10));
        let b = encode(&sample(3000));
        // Two messages in one frame.
        let mut both = BytesMut::new();
        both.extend_from_slice(&a);
        both.extend_from_slice(&b);
        let mut d = Decoder::new(1 << 20);
        d.push(both.freeze());
        assert_eq!(d.next(), Ok(Some(sample(10))));
        assert_eq!(d.next(), Ok(Some(sample(3000))));
        assert_eq!(d.next(), Ok(None));
        assert!(!d.has_partial());
        // One message split byte by byte, then a whole one behind it.
        let mut d = Decoder::new(1 << 20);
        for i in 0..b.len() {
            d.push(b.slice(i..i + 1));
            if i + 1 < b.len() {
                assert_eq!(d.next(), Ok(None), "at byte {i}");
                assert!(d.has_partial());
            }
        }
        assert_eq!(d.next(), Ok(Some(sample(3000))));
        // The tail of one message and the head of the next in one frame.
        let mut d = Decoder::new(1 << 20);
        let mut joined = BytesMut::new();
        joined.extend_from_slice(&b);
        joined.extend_from_slice(&a);
        let joined = joined.freeze();
        d.push(joined.slice(..7));
        assert_eq!(d.next(), Ok(None));
        d.push(joined.slice(7..b.len() + 2));
        assert_eq!(d.next(), Ok(Some(sample(3000))));
        assert_eq!(d.next(), Ok(None));
        d.push(joined.slice(b.len() + 2..));
        assert_eq!(d.next(), Ok(Some(sample(10))));
        assert_eq!(d.next(), Ok(None));
    }

    #[test]
    fn oversized_compressed_and_garbage_messages_are_refused() {
        let big = encode(&sample(2000));
        let mut d = Decoder::new(1000);
        // The prefix alone is enough to refuse.
        d.push(big.slice(..5));
        let e = d.next().expect_err("over the limit");
        assert_eq!(e.code, Code::ResourceExhausted);

        let mut compressed = BytesMut::from(&encode(&sample(1))[..]);
        compressed[0] = 1;
        let mut d = Decoder::new(1000);
        d.push(compressed.freeze());
        assert_eq!(d.next().expect_err("compressed").code, Code::Unimplemented);

        let mut d = Decoder::new(1000);
        d.push(Bytes::from_static(&[0, 0, 0, 0, 3, 0xff, 0xff, 0xff]));
        assert_eq!(d.next().expect_err("garbage").code, Code::Internal);
    }

    #[test]
    fn status_trailers_are_percent_encoded() {
        let t = Status::new(Code::ResourceExhausted, "too big: 5 % more ✓").trailers();
        assert_eq!(t["grpc-status"], "8");
        assert_eq!(t["grpc-message"], "too big: 5 %25 more %E2%9C%93");
        let t = Status::ok().trailers();
        assert_eq!(t["grpc-status"], "0");
        assert!(t.get("grpc-message").is_none());
    }
}
