//! Adapter-side helpers around the wire types of `nacelle_proto`: the metadata of a request
//! as the handlers see it ([`RequestMeta`]), infallible serialisation of the server's own
//! messages, and the lenient-reading helpers of the handlers.

use std::collections::HashMap;

use bytes::Bytes;
use nacelle_core::{ConfigKey, CoreError};
use nacelle_proto::{Message, Metadata, Payload};
use serde::{Deserialize, Serialize};

pub(crate) use nacelle_proto::request_id_of;

/// A quick read of a JSON body's `requestId`: the string right after the first
/// `"requestId":"`, when it holds no escape. Clients write their acks compactly
/// (`{"resultCode":200,…,"requestId":"42"}`), so this finds the id without parsing the JSON.
/// It is only a hint: a nested object or an escaped key could mislead it, so a caller
/// matches it against what it waits for and otherwise reads the body with
/// [`request_id_of`].
pub(crate) fn request_id_hint(body: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"requestId\":\"";
    // The searcher is built once: `memmem::find` builds one per call, which cost more
    // than the search itself on every ack (callgrind: ~400 instructions per push).
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(KEY));
    let start = FINDER.find(body)? + KEY.len();
    let rest = &body[start..];
    let value = &rest[..memchr::memchr(b'"', rest)?];
    if value.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(value).ok()
}

/// The metadata of one request: `metadata.type`, the client IP the client reported and the
/// request headers (`accessToken`, `app`, …), which Nacos clients put in
/// `metadata.headers`. Every unary handler receives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequestMeta {
    /// `metadata.type` (empty when absent).
    pub type_name: String,
    /// `metadata.clientIp`: the client's claim, not a verified address.
    pub client_ip: String,
    /// `metadata.headers`.
    pub headers: HashMap<String, String>,
}

impl RequestMeta {
    /// Takes a payload apart (nothing is copied): its metadata and its JSON body.
    pub fn take(p: Payload) -> (RequestMeta, Bytes) {
        let meta = p
            .metadata
            .map(
                |Metadata {
                     r#type,
                     client_ip,
                     headers,
                 }| RequestMeta {
                    type_name: r#type,
                    client_ip,
                    headers,
                },
            )
            .unwrap_or_default();
        (meta, p.body.map(|b| b.value).unwrap_or_default())
    }

    /// One header, by its exact name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The names of the headers, sorted (for logs: values may be credentials).
    pub fn header_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.headers.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// Serializes a message. The server's message types cannot fail to serialize (no maps
/// with non-string keys, no custom serializers); should one ever fail, a generic error
/// body is sent instead and the failure is logged.
pub(crate) fn to_json<T: Serialize>(msg: &T) -> Bytes {
    match serde_json::to_vec(msg) {
        Ok(v) => Bytes::from(v),
        Err(e) => {
            tracing::error!(error = %e, "cannot serialize a gRPC message");
            Bytes::from_static(
                br#"{"resultCode":500,"errorCode":500,"message":"serialization failed","success":false}"#,
            )
        }
    }
}

/// The payload of one of the server's messages (see [`to_json`]).
pub(crate) fn message<M: Message>(msg: &M) -> Payload {
    Payload::new(M::TYPE, to_json(msg))
}

/// Parses a request body.
pub(crate) fn from_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(body)
}

/// `Some(s)` unless `s` is absent or blank: on the wire an empty string means "not given".
pub(crate) fn non_blank(s: Option<&str>) -> Option<&str> {
    s.filter(|v| !v.trim().is_empty())
}

/// Builds a key from the fields a client sent; the namespace is normalised here.
pub(crate) fn key_of(
    tenant: Option<&str>,
    group: Option<&str>,
    data_id: Option<&str>,
) -> Result<ConfigKey, CoreError> {
    ConfigKey::parse(tenant, group.unwrap_or(""), data_id.unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacelle_proto::response::HealthCheckResponse;

    #[test]
    fn a_payload_is_taken_apart_with_its_headers() {
        let p = Payload::new("ConfigQueryRequest", &b"{}"[..])
            .with_client_ip("10.1.2.3")
            .with_header("accessToken", "t")
            .with_header("app", "shop");
        let (meta, body) = RequestMeta::take(p);
        assert_eq!(meta.type_name, "ConfigQueryRequest");
        assert_eq!(meta.client_ip, "10.1.2.3");
        assert_eq!(meta.header("accessToken"), Some("t"));
        assert_eq!(meta.header_names(), ["accessToken", "app"]);
        assert_eq!(&body[..], b"{}");
        let (meta, body) = RequestMeta::take(Payload::default());
        assert_eq!(meta, RequestMeta::default());
        assert!(body.is_empty());
    }

    #[test]
    fn the_server_s_messages_are_framed_as_before() {
        let p = message(&HealthCheckResponse::ok(Some("7".into())));
        assert_eq!(p.type_name(), "HealthCheckResponse");
        assert_eq!(
            p.body(),
            br#"{"resultCode":200,"errorCode":0,"requestId":"7","success":true}"#
        );
        assert_eq!(non_blank(Some(" ")), None);
        assert_eq!(non_blank(Some("a")), Some("a"));
    }

    #[test]
    fn the_request_id_hint_reads_compact_acks_and_gives_up_on_anything_else() {
        // What Java's Jackson, Go's encoding/json and our own clients send.
        let java = br#"{"resultCode":200,"errorCode":0,"success":true,"requestId":"42"}"#;
        assert_eq!(request_id_hint(java), Some("42"));
        assert_eq!(request_id_hint(br#"{"requestId":"","x":1}"#), Some(""));
        // Spaces (Python's json.dumps), escapes, no id, a cut body: no hint; the caller
        // parses the JSON.
        assert_eq!(request_id_hint(br#"{"requestId": "42"}"#), None);
        assert_eq!(request_id_hint(br#"{"requestId":"4\"2"}"#), None);
        assert_eq!(request_id_hint(br#"{"resultCode":200}"#), None);
        assert_eq!(request_id_hint(br#"{"requestId":"42"#), None);
        assert_eq!(
            request_id_of(br#"{"requestId": "42"}"#).as_deref(),
            Some("42")
        );
        // A nested id comes first: only a hint, which the connection checks against its
        // pending pushes before believing it.
        let nested = br#"{"data":{"requestId":"1"},"requestId":"2"}"#;
        assert_eq!(request_id_hint(nested), Some("1"));
        assert_eq!(request_id_of(nested).as_deref(), Some("2"));
    }
}

/// The two parts of a `Payload` the bi-stream's session reads — `metadata.type` and
/// `body.value` — borrowed from the message's bytes, without building the `Payload`.
///
/// Decoding a client's ack into a `Payload` allocated its type, client IP, header map, type
/// URL and body and validated each (callgrind: ~750 instructions of every push's ack). This
/// reads the protobuf wire format of the shapes clients send and gives up — `None`, and the
/// caller decodes the `Payload` as before — on anything else: an unknown field, a field
/// sent twice, a wire type the schema does not have, a malformed length or varint, invalid
/// UTF-8 in any string field. So where it answers, `Payload::decode` succeeds with the same
/// type and body (tested against prost on generated messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PayloadView<'a> {
    pub type_name: &'a str,
    pub body: &'a [u8],
}

impl<'a> PayloadView<'a> {
    /// Reads `msg` (one gRPC message, without its 5-byte prefix).
    pub fn parse(msg: &'a [u8]) -> Option<Self> {
        let mut view = PayloadView {
            type_name: "",
            body: &[],
        };
        let (mut metadata, mut body) = (false, false);
        let mut fields = Fields(msg);
        while let Some((number, value)) = fields.next()? {
            match (number, value) {
                // Payload.metadata
                (2, Field::Len(m)) if !metadata => {
                    metadata = true;
                    view.type_name = metadata_type(m)?;
                }
                // Payload.body
                (3, Field::Len(b)) if !body => {
                    body = true;
                    view.body = any_value(b)?;
                }
                _ => return None,
            }
        }
        Some(view)
    }
}

/// `Metadata.type`, checking the other fields (`clientIp`, the `headers` entries).
fn metadata_type(msg: &[u8]) -> Option<&str> {
    let (mut type_name, mut seen_type, mut seen_ip) = ("", false, false);
    let mut fields = Fields(msg);
    while let Some((number, value)) = fields.next()? {
        match (number, value) {
            (3, Field::Len(s)) if !seen_type => {
                seen_type = true;
                type_name = std::str::from_utf8(s).ok()?;
            }
            (8, Field::Len(s)) if !seen_ip => {
                seen_ip = true;
                std::str::from_utf8(s).ok()?;
            }
            // One map entry: key = 1, value = 2, both strings, each at most once.
            (7, Field::Len(entry)) => {
                let (mut key, mut val) = (false, false);
                let mut parts = Fields(entry);
                while let Some((n, v)) = parts.next()? {
                    let Field::Len(s) = v else { return None };
                    let seen = match n {
                        1 => &mut key,
                        2 => &mut val,
                        _ => return None,
                    };
                    if std::mem::replace(seen, true) {
                        return None;
                    }
                    std::str::from_utf8(s).ok()?;
                }
            }
            _ => return None,
        }
    }
    Some(type_name)
}

/// `Any.value`, checking `type_url`.
fn any_value(msg: &[u8]) -> Option<&[u8]> {
    let (mut value, mut seen_url, mut seen_value) = (&[][..], false, false);
    let mut fields = Fields(msg);
    while let Some((number, field)) = fields.next()? {
        match (number, field) {
            (1, Field::Len(s)) if !seen_url => {
                seen_url = true;
                std::str::from_utf8(s).ok()?;
            }
            (2, Field::Len(v)) if !seen_value => {
                seen_value = true;
                value = v;
            }
            _ => return None,
        }
    }
    Some(value)
}

/// One field of a message on the wire: only length-delimited ones are of the schema;
/// anything else is reported (its value not even skipped) so that the caller gives up.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Len(&'a [u8]),
    Other,
}

/// The fields of a message, in order. `next` returns `None` for malformed input,
/// `Some(None)` at the end.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    #[allow(clippy::type_complexity)]
    fn next(&mut self) -> Option<Option<(u64, Field<'a>)>> {
        if self.0.is_empty() {
            return Some(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 {
            return None;
        }
        let field = match key & 7 {
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                if len > self.0.len() {
                    return None;
                }
                let (value, rest) = self.0.split_at(len);
                self.0 = rest;
                Field::Len(value)
            }
            _ => Field::Other,
        };
        Some(Some((number, field)))
    }

    /// A base-128 varint of at most 10 bytes.
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for (i, &b) in self.0.iter().enumerate().take(10) {
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if i == 9 && b > 1 {
                    return None; // more than 64 bits
                }
                self.0 = &self.0[i + 1..];
                return Some(value);
            }
        }
        None
    }
}

#[cfg(test)]
mod view_tests {
    use prost::Message as _;

    use super::*;

    /// Field `number` as a length-delimited field holding `value`.
    fn len_field(number: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        let mut n = value.len();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
        out.extend_from_slice(value);
        out
    }

    /// Messages as clients write them, and unusual but valid ones.
    fn samples() -> Vec<Vec<u8>> {
        let ack = br#"{"resultCode":200,"errorCode":0,"requestId":"42"}"#.to_vec();
        let mut out: Vec<Vec<u8>> = vec![
            Payload::new("ConfigChangeNotifyResponse", ack.clone()).encode_to_vec(),
            Payload::new("NotifySubscriberResponse", ack.clone())
                .with_client_ip("10.0.0.7")
                .with_header("accessToken", "t")
                .with_header("app", "démo")
                .encode_to_vec(),
            Payload::new("", Vec::new()).encode_to_vec(),
            Payload::default().encode_to_vec(),
            Vec::new(),
        ];
        // Fields in another order, an Any with its type URL, an empty map entry.
        let meta = [
            len_field(8, b"1.2.3.4"),
            len_field(3, b"T"),
            len_field(7, b""),
        ]
        .concat();
        let any = [len_field(2, b"{}"), len_field(1, b"type.googleapis.com/x")].concat();
        out.push([len_field(3, &any), len_field(2, &meta)].concat());
        // Shapes the view leaves to prost: a field sent twice, an unknown field, a varint.
        out.push(
            [
                len_field(2, &len_field(3, b"A")),
                len_field(2, &len_field(3, b"B")),
            ]
            .concat(),
        );
        out.push(
            [len_field(
                2,
                &[len_field(3, b"A"), len_field(3, b"B")].concat(),
            )]
            .concat(),
        );
        out.push([len_field(3, &len_field(2, b"x")), len_field(9, b"?")].concat());
        out.push([vec![0x08, 0x01], len_field(2, &len_field(3, b"A"))].concat());
        out
    }

    /// Where the view answers, prost decodes the same message to the same type and body.
    fn agrees_with_prost(msg: &[u8]) {
        if let Some(view) = PayloadView::parse(msg) {
            let p = Payload::decode(msg).expect("the view only takes what prost decodes");
            assert_eq!(
                (view.type_name, view.body),
                (p.type_name(), p.body()),
                "{msg:?}"
            );
        }
    }

    #[test]
    fn reads_what_clients_send() {
        let s = samples();
        for msg in &s[..6] {
            let view = PayloadView::parse(msg).expect("a client's shape");
            let p = Payload::decode(&msg[..]).expect("valid");
            assert_eq!((view.type_name, view.body), (p.type_name(), p.body()));
        }
        assert_eq!(PayloadView::parse(&s[5]).map(|v| v.type_name), Some("T"));
        for msg in &s[6..] {
            assert_eq!(PayloadView::parse(msg), None, "left to prost: {msg:?}");
        }
    }

    /// Every truncation and many byte changes of the samples: the view never disagrees
    /// with prost (it answers only where prost succeeds, with the same parts).
    #[test]
    fn never_disagrees_with_prost_on_damaged_messages() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for msg in samples() {
            for cut in 0..msg.len() {
                agrees_with_prost(&msg[..cut]);
            }
            for _ in 0..2000 {
                let mut m = msg.clone();
                if m.is_empty() {
                    break;
                }
                for _ in 0..1 + rand() % 3 {
                    let i = (rand() % m.len() as u64) as usize;
                    m[i] = match rand() % 4 {
                        0 => 0x80,
                        1 => 0xff,
                        2 => m[i] ^ (1 << (rand() % 8)),
                        _ => rand() as u8,
                    };
                }
                agrees_with_prost(&m);
            }
        }
    }
}
