//! Request parameters as Nacos reads them: the query string and a form body merged (query
//! first, the first value of a name wins), decoded strictly — a parameter that is not valid
//! UTF-8 after percent-decoding is a 400, never silently replaced.

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderMap;

use nacelle_core::{Caller, ConfigKey, ConfigMeta, PageRequest, Protocol, TrustedProxies, Variant};
use nacelle_service::auth::Credentials;
use nacelle_service::{PublishRequest, WriteNote};

use crate::error::ApiError;
use crate::AppState;

/// Parameters by name. Names come from clients, so the hash is keyed per process
/// (`ahash`'s random state, resistant to chosen collisions) yet cheaper than SipHash.
pub(crate) type ParamMap = HashMap<String, String, ahash::RandomState>;

/// Merged query and form parameters, plus what a handler needs from the request itself.
#[derive(Debug)]
pub(crate) struct Params {
    values: ParamMap,
    pub headers: HeaderMap,
    /// Who is asking: the client IP under the trusted-proxy policy, the protocol (v1 or
    /// v2 by path), the app name the client reported.
    pub caller: Caller,
    /// The `file` part of a `multipart/form-data` body (a config import's archive); the
    /// body's text parts are parameters like form fields.
    pub file: Option<bytes::Bytes>,
    /// An `application/json` body, as sent (a config clone's list).
    pub json_body: Option<bytes::Bytes>,
}

impl Params {
    /// A parameter, if present (possibly empty).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A parameter that is present and not blank.
    pub fn non_blank(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.trim().is_empty())
    }

    /// A required parameter; missing → [`ApiError::Missing`].
    pub fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.get(name)
            .ok_or_else(|| ApiError::Missing(name.to_string()))
    }

    /// A parameter or `""`.
    pub fn or_empty(&self, name: &str) -> String {
        self.get(name).unwrap_or("").to_string()
    }

    /// A header as a string, if present and valid.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// A positive integer parameter with a default; anything else is a 400.
    pub fn page_number(&self, name: &str, default: u64, max: u64) -> Result<u64, ApiError> {
        match self.non_blank(name) {
            None => Ok(default),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n >= 1 && n <= max => Ok(n),
                _ => Err(ApiError::Invalid(format!(
                    "invalid {name} : {v} (expected an integer from 1 to {max})"
                ))),
            },
        }
    }

    /// `pageNo` and `pageSize` as the v1 and v2 APIs read them: 1 and 100 when absent,
    /// else integers from 1 to `i32::MAX` (anything else is a 400); the size clamped to
    /// `max_size` when there is one.
    pub fn page_request(&self, max_size: Option<u64>) -> Result<PageRequest, ApiError> {
        let page_no = self.page_number("pageNo", 1, PageRequest::MAX_PAGE_PARAM)?;
        let page_size = self.page_number("pageSize", 100, PageRequest::MAX_PAGE_PARAM)?;
        Ok(PageRequest {
            page_no,
            page_size: max_size.map_or(page_size, |m| page_size.min(m)),
        })
    }
}

fn is_form(headers: &HeaderMap) -> bool {
    match headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(ct) => {
            let ct = ct.trim().to_ascii_lowercase();
            ct.is_empty() || ct.starts_with("application/x-www-form-urlencoded")
        }
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

fn multipart_boundary(headers: &HeaderMap) -> Option<String> {
    let ct = headers.get(CONTENT_TYPE)?.to_str().ok()?;
    multer::parse_boundary(ct).ok()
}

/// Reads a `multipart/form-data` body of at most `limit` bytes: text parts become
/// parameters (after the query string's, the first value of a name winning), the part
/// named `file` is returned.
async fn read_multipart(
    body: axum::body::Body,
    boundary: String,
    limit: usize,
    values: &mut ParamMap,
) -> Result<Option<bytes::Bytes>, ApiError> {
    let constraints =
        multer::Constraints::new().size_limit(multer::SizeLimit::new().whole_stream(limit as u64));
    let mut parts =
        multer::Multipart::with_constraints(body.into_data_stream(), boundary, constraints);
    let mut file = None;
    let refused = |e: multer::Error| match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            ApiError::TooLarge(format!("request body too large: over {limit} bytes"))
        }
        e => ApiError::Invalid(format!("could not read the multipart body: {e}")),
    };
    while let Some(part) = parts.next_field().await.map_err(refused)? {
        let name = part.name().unwrap_or_default().to_string();
        if name == "file" {
            let data = part.bytes().await.map_err(refused)?;
            file.get_or_insert(data);
            continue;
        }
        let data = part.bytes().await.map_err(refused)?;
        let text = String::from_utf8(data.to_vec())
            .map_err(|_| ApiError::Invalid(format!("parameter {name} is not UTF-8")))?;
        values.entry(name).or_insert(text);
    }
    Ok(file)
}

/// Decodes `a=b&c=d` form encoding into `out`, keeping the first value of each name. Every
/// name and value is checked (a later duplicate that is not UTF-8 is still a 400); only a
/// name not seen before is stored, and a component without escapes is not copied to be
/// checked.
pub(crate) fn decode_form_into(raw: &[u8], out: &mut ParamMap) -> Result<(), ApiError> {
    for pair in raw.split(|b| *b == b'&') {
        if pair.is_empty() {
            continue;
        }
        let (k, v) = match pair.iter().position(|b| *b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &[][..]),
        };
        let k = decode_component(k)?;
        let v = decode_component(v)?;
        if !out.contains_key(k.as_ref()) {
            out.insert(k.into_owned(), v.into_owned());
        }
    }
    Ok(())
}

/// Decodes one form component: `+` is a space, `%XX` a byte (a `%` not followed by two hex
/// digits stays as it is), and the result must be UTF-8. Borrowed when there is nothing
/// to decode.
fn decode_component(raw: &[u8]) -> Result<Cow<'_, str>, ApiError> {
    let not_utf8 = |_| ApiError::Invalid("request parameters are not valid UTF-8".into());
    if !raw.iter().any(|b| matches!(b, b'+' | b'%')) {
        return std::str::from_utf8(raw)
            .map(Cow::Borrowed)
            .map_err(not_utf8);
    }
    let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16)).map(|d| d as u8);
    let mut out = Vec::with_capacity(raw.len());
    let mut rest = raw;
    // Runs without an escape are copied whole; only `+` and `%` are looked at one by one.
    while let Some(at) = rest.iter().position(|b| matches!(b, b'+' | b'%')) {
        out.extend_from_slice(&rest[..at]);
        if rest[at] == b'+' {
            out.push(b' ');
            rest = &rest[at + 1..];
            continue;
        }
        match (hex(rest.get(at + 1)), hex(rest.get(at + 2))) {
            (Some(hi), Some(lo)) => {
                out.push(hi << 4 | lo);
                rest = &rest[at + 3..];
            }
            _ => {
                out.push(b'%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.extend_from_slice(rest);
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|e| not_utf8(e.utf8_error()))
}

/// The address a proxy header names: `X-Real-IP`, else the first `X-Forwarded-For`
/// entry (as Nacos reads them).
fn forwarded_ip(headers: &HeaderMap) -> Option<IpAddr> {
    let header_ip = |name: &str| -> Option<IpAddr> {
        let v = headers.get(name)?.to_str().ok()?;
        v.split(',').next()?.trim().parse::<IpAddr>().ok()
    };
    header_ip("x-real-ip").or_else(|| header_ip("x-forwarded-for"))
}

/// The address the request says its client has, as Nacos reads it
/// (`WebUtils.getRemoteIp`): the first `X-Forwarded-For` entry, else `X-Real-IP`. Believed
/// from anyone, and used only to match gray rules (`Caller::reported_ip`).
fn reported_ip(headers: &HeaderMap) -> Option<IpAddr> {
    let header_ip = |name: &str| -> Option<IpAddr> {
        let v = headers.get(name)?.to_str().ok()?;
        v.split(',').next()?.trim().parse::<IpAddr>().ok()
    };
    header_ip("x-forwarded-for")
        .or_else(|| header_ip("x-real-ip"))
        .map(|ip| ip.to_canonical())
}

/// The client IP: the socket address, or the address a proxy header names when the socket
/// peer is a trusted proxy. Nacos believes the headers from anyone; Nacelle does not, so
/// an IP-based decision (limits, listener queries, history, audit) cannot be forged. Gray
/// rules alone match what the client reports ([`reported_ip`]), as Nacos does.
pub(crate) fn client_ip(
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    trusted: &TrustedProxies,
) -> Option<IpAddr> {
    let peer = peer?.ip();
    if trusted.is_empty() {
        // The common case: no proxy is trusted, so the headers are not even read.
        return Some(peer.to_canonical());
    }
    Some(trusted.resolve(peer, forwarded_ip(headers)))
}

/// The credentials of a request, where Nacos accepts them: `Authorization: Bearer <t>` or
/// `accessToken`, else `username` + `password` — as headers or as parameters (query or
/// form), names case-insensitive, headers first.
pub(crate) fn credentials(headers: &HeaderMap, values: &ParamMap) -> Credentials {
    let param = |name: &str| -> Option<String> {
        let header = headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty());
        if let Some(v) = header {
            return Some(v.to_string());
        }
        values
            .get(name)
            .or_else(|| {
                values
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v)
            })
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let bearer = param("Authorization").and_then(|v| {
        let (scheme, token) = v.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("Bearer")
            .then(|| token.trim().to_string())
            .filter(|t| !t.is_empty())
    });
    Credentials {
        token: bearer.or_else(|| param("accessToken")),
        username: param("username"),
        password: param("password"),
    }
}

/// The caller of an HTTP request.
fn caller_of(path: &str, headers: &HeaderMap, ip: Option<IpAddr>) -> Caller {
    let protocol = if path.starts_with("/nacos/v2/") {
        Protocol::HttpV2
    } else if path.starts_with("/nacos/v3/admin/") {
        Protocol::HttpV3Admin
    } else if path.starts_with("/nacos/v3/client/") {
        Protocol::HttpV3
    } else {
        Protocol::HttpV1
    };
    let mut caller = Caller::anonymous(protocol, ip);
    caller.reported_ip = reported_ip(headers);
    caller.app_name = headers
        .get("client-appname")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(Into::into);
    // An administrator's reason for writing past a review policy (audited by the service):
    // raw UTF-8 or percent-encoded UTF-8 (a browser can only send ASCII in a header).
    caller.emergency = headers
        .get("x-nacelle-emergency")
        .map(|v| emergency_reason(v.as_bytes()))
        .filter(|v| !v.is_empty())
        .map(Into::into);
    caller
}

/// The reason an `X-Nacelle-Emergency` header gives: its bytes as UTF-8 (invalid bytes
/// replaced), percent-decoded where that yields UTF-8, trimmed.
fn emergency_reason(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let decoded = percent_encoding::percent_decode_str(&text)
        .decode_utf8()
        .map(|d| d.into_owned())
        .unwrap_or_else(|_| text.to_string());
    decoded.trim().to_string()
}

impl FromRequest<AppState> for Params {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0);
        let mut values = ParamMap::default();
        if let Some(q) = parts.uri.query() {
            decode_form_into(q.as_bytes(), &mut values)?;
        }
        let (mut file, mut json_body) = (None, None);
        if is_form(&parts.headers) {
            let bytes = axum::body::to_bytes(body, st.options.max_request_bytes)
                .await
                .map_err(|e| body_error(&e, st.options.max_request_bytes))?;
            if !bytes.is_empty() {
                decode_form_into(&bytes, &mut values)?;
            }
        } else if let Some(boundary) = multipart_boundary(&parts.headers) {
            // An import's archive may be larger than a publish's body.
            let limit = if values.get("import").map(String::as_str) == Some("true") {
                st.options
                    .max_request_bytes
                    .max(crate::archive::MAX_UPLOAD_BYTES)
            } else {
                st.options.max_request_bytes
            };
            file = read_multipart(body, boundary, limit, &mut values).await?;
        } else if is_json(&parts.headers) {
            let bytes = axum::body::to_bytes(body, st.options.max_request_bytes)
                .await
                .map_err(|e| body_error(&e, st.options.max_request_bytes))?;
            json_body = Some(bytes);
        }
        let ip = client_ip(&parts.headers, peer, &st.options.trusted_proxies);
        let mut caller = caller_of(parts.uri.path(), &parts.headers, ip);
        // A login checks its own user name and password (once, under the throttle).
        if st.service.access().enabled() && !parts.uri.path().ends_with("/login") {
            let creds = credentials(&parts.headers, &values);
            caller.identity = st.service.access().identify(&creds, &caller).await;
        }
        Ok(Params {
            values,
            headers: parts.headers,
            caller,
            file,
            json_body,
        })
    }
}

/// Maps a body read error: over the limit is 413, anything else a 400.
fn body_error(e: &axum::Error, limit: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return ApiError::TooLarge(format!("request body too large: over {limit} bytes"));
        }
        if let Some(over) = err.downcast_ref::<crate::budget::OverBudget>() {
            return ApiError::Unavailable(over.0.clone());
        }
        source = err.source();
    }
    ApiError::Invalid(format!("could not read the request body: {e}"))
}

/// Parameter names that differ between the v1 and v2 publish APIs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PublishNames {
    pub config_tags: &'static str,
    pub src_user: &'static str,
}

impl PublishNames {
    pub const V1: PublishNames = PublishNames {
        config_tags: "config_tags",
        src_user: "src_user",
    };
    pub const V2: PublishNames = PublishNames {
        config_tags: "configTags",
        src_user: "srcUser",
    };
}

/// The parameter of a write's message (Nacelle's own; every HTTP API and the console
/// read it, and gRPC publishes carry it in `additionMap`).
pub const MESSAGE: &str = "message";

impl Params {
    /// The publish request these parameters describe, for `key`: content (required),
    /// optional fields, the `casMd5` header, and the variant from the `betaIps` header and
    /// the `tag` parameter ([`Variant::from_wire`]).
    pub fn publish_request(
        &self,
        key: ConfigKey,
        names: PublishNames,
    ) -> Result<PublishRequest, ApiError> {
        let content = self.required("content")?.to_string();
        let variant = Variant::from_wire_ext(
            self.header("betaIps"),
            self.get("tag"),
            self.get("grayName"),
            self.get("grayRule"),
            self.get("grayPriority"),
        )?;
        Ok(PublishRequest {
            key,
            content,
            config_type: self.get("type").map(str::to_string),
            meta: ConfigMeta {
                app_name: self.or_empty("appName"),
                desc: self.or_empty("desc"),
                r#use: self.or_empty("use"),
                effect: self.or_empty("effect"),
                schema: self.or_empty("schema"),
                config_tags: self.or_empty(names.config_tags),
                encrypted_data_key: self.or_empty("encryptedDataKey"),
            },
            src_user: self.src_user(names),
            cas_md5: self.header("casMd5").map(str::to_string),
            variant,
            message: self.or_empty(MESSAGE),
            change_id: None,
        })
    }

    /// The tag a read asks for: the `tag` parameter, else the `Vipserver-Tag` header (as
    /// Nacos reads it).
    pub fn tag(&self) -> Option<&str> {
        self.non_blank("tag")
            .or_else(|| self.header("Vipserver-Tag"))
    }

    /// The `src_user`/`srcUser` parameter: who the client says makes the change.
    pub fn src_user(&self, names: PublishNames) -> String {
        self.or_empty(names.src_user)
    }

    /// Who asks for a write without content and why: the claimed `src_user` under
    /// `names`, and the `message` parameter.
    pub fn write_note(&self, names: PublishNames) -> WriteNote {
        WriteNote::with_message(&self.src_user(names), &self.or_empty(MESSAGE))
    }
}

/// Encodes like Java's `URLEncoder.encode(s, "UTF-8")`: letters, digits and `.-*_` stay,
/// space becomes `+`, every other byte becomes `%XX` (upper case).
pub(crate) fn java_url_encode(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = s.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_') {
            continue;
        }
        // The run before `i` is ASCII that stays as it is, copied at once. `i` is a char
        // boundary: the byte before it is ASCII (or `i` starts the string or follows an
        // escaped byte, which `run` then equals).
        out.push_str(s.get(run..i).unwrap_or_default());
        if b == b' ' {
            out.push('+');
        } else {
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        }
        run = i + 1;
    }
    out.push_str(s.get(run..).unwrap_or_default());
}

/// A `Long` as Jackson (Nacos's JSON reader) reads one: a JSON number, or a string holding
/// one (`"5"`: ids as `show=all`, searches and every v3 model write them); `null` or
/// absent is `None`. For `#[serde(default, deserialize_with = "…")]`.
pub(crate) fn long_or_string<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<i64>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Long {
        Number(i64),
        Text(String),
    }
    match <Option<Long> as serde::Deserialize>::deserialize(d)? {
        None => Ok(None),
        Some(Long::Number(n)) => Ok(Some(n)),
        Some(Long::Text(t)) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("not a number: {t:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_decoding_is_strict_and_first_wins() {
        let mut m = ParamMap::default();
        decode_form_into(b"a=1&b=x+y%2Bz&a=2&c&d=%E4%B8%AD", &mut m).expect("valid form");
        assert_eq!(m["a"], "1");
        assert_eq!(m["b"], "x y+z");
        assert_eq!(m["c"], "");
        assert_eq!(m["d"], "中");
        let mut m = ParamMap::default();
        assert!(decode_form_into(b"a=%FF%FE", &mut m).is_err());
        // A later duplicate is checked too, though the first value wins.
        let mut m = ParamMap::default();
        assert!(decode_form_into(b"a=1&a=%FF", &mut m).is_err());
        // A `%` without two hex digits after it is kept as it is, as is a lone `%`.
        let mut m = ParamMap::default();
        decode_form_into(b"p=100%&q=%zz%4&r=%41%42c&s=%e4%b8%ad", &mut m).expect("valid form");
        assert_eq!(m["p"], "100%");
        assert_eq!(m["q"], "%zz%4");
        assert_eq!(m["r"], "ABc");
        assert_eq!(m["s"], "中");
        // Escaped names are decoded before they are compared.
        let mut m = ParamMap::default();
        decode_form_into(b"%61=1&a=2&b+c=3", &mut m).expect("valid form");
        assert_eq!(m["a"], "1");
        assert_eq!(m["b c"], "3");
    }

    /// The decoder agrees with `percent-encoding` (after `+` → space) on every string of
    /// escapes, partial escapes, pluses and non-UTF-8 bytes up to length 5.
    #[test]
    fn emergency_reasons_are_read_raw_or_percent_decoded() {
        assert_eq!(emergency_reason(b" db down "), "db down");
        assert_eq!(emergency_reason("数据库宕机".as_bytes()), "数据库宕机");
        assert_eq!(
            emergency_reason(b"%E6%95%B0%E6%8D%AE%E5%BA%93%20down"),
            "数据库 down"
        );
        // Not an escape, or not UTF-8 once decoded: kept as sent.
        assert_eq!(emergency_reason(b"100% broken"), "100% broken");
        assert_eq!(emergency_reason(b"%FF%FE"), "%FF%FE");
    }

    #[test]
    fn component_decoding_matches_percent_encoding() {
        const ALPHABET: &[u8] = b"a%+2Fe\xffG";
        let mut inputs: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..5 {
            let longer: Vec<Vec<u8>> = inputs
                .iter()
                .filter(|i| i.len() == inputs.last().map_or(0, Vec::len))
                .flat_map(|i| {
                    ALPHABET.iter().map(move |b| {
                        let mut next = i.clone();
                        next.push(*b);
                        next
                    })
                })
                .collect();
            inputs.extend(longer);
        }
        assert!(inputs.len() > 10_000);
        for raw in &inputs {
            let plus_free: Vec<u8> = raw
                .iter()
                .map(|b| if *b == b'+' { b' ' } else { *b })
                .collect();
            let expected = percent_encoding::percent_decode(&plus_free)
                .decode_utf8()
                .ok()
                .map(|s| s.into_owned());
            let got = decode_component(raw).ok().map(Cow::into_owned);
            assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn java_encoding() {
        let mut s = String::new();
        java_url_encode("app\u{2}DEFAULT_GROUP\u{1}a b*中", &mut s);
        assert_eq!(s, "app%02DEFAULT_GROUP%01a+b*%E4%B8%AD");
    }

    /// Java's `URLEncoder` byte by byte: what the run-copying encoder must equal.
    fn java_reference(s: &str) -> String {
        let mut out = String::new();
        for &b in s.as_bytes() {
            match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                    out.push(b as char)
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
        out
    }

    #[test]
    fn java_encoding_matches_the_byte_by_byte_rule() {
        let cases = [
            "",
            "a",
            " ",
            "中",
            "中文",
            "x中",
            "中x",
            "a b",
            "  ",
            "é~!@#$%^&()+={}[]|\\:;'<>,?/\"",
            "dataId.with-dots_and*stars",
            "\u{1}\u{2}\u{7f}\u{80}\u{10ffff}",
            "mixed 中 text é and 😀 end",
        ];
        for case in cases {
            let mut got = String::from("prefix:");
            java_url_encode(case, &mut got);
            assert_eq!(got, format!("prefix:{}", java_reference(case)), "{case:?}");
        }
        // Every char below U+0800 (all one- and two-byte UTF-8 sequences), one by one and together.
        let all: String = (0u32..0x800).filter_map(char::from_u32).collect();
        for c in all.chars() {
            let mut got = String::new();
            java_url_encode(c.encode_utf8(&mut [0; 4]), &mut got);
            assert_eq!(got, java_reference(&c.to_string()), "{c:?}");
        }
        let mut got = String::new();
        java_url_encode(&all, &mut got);
        assert_eq!(got, java_reference(&all));
    }

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn forwarded_headers_only_from_trusted_proxies() {
        let mut h = HeaderMap::new();
        let peer: SocketAddr = "[::ffff:10.0.0.1]:80".parse().expect("addr");
        let none = TrustedProxies::none();
        let trusted = TrustedProxies::parse_list("10.0.0.0/8").expect("cidr");
        assert_eq!(client_ip(&h, Some(peer), &none), ip("10.0.0.1"));
        h.insert("x-forwarded-for", "1.2.3.4, 5.6.7.8".parse().expect("hv"));
        assert_eq!(client_ip(&h, Some(peer), &none), ip("10.0.0.1"));
        assert_eq!(client_ip(&h, Some(peer), &trusted), ip("1.2.3.4"));
        h.insert("x-real-ip", "9.9.9.9".parse().expect("hv"));
        assert_eq!(client_ip(&h, Some(peer), &trusted), ip("9.9.9.9"));
        assert_eq!(client_ip(&h, Some(peer), &none), ip("10.0.0.1"));
        h.insert("x-real-ip", "garbage".parse().expect("hv"));
        assert_eq!(client_ip(&h, Some(peer), &trusted), ip("1.2.3.4"));
    }

    #[test]
    fn the_reported_ip_is_read_as_nacos_reads_it_from_anyone() {
        let mut h = HeaderMap::new();
        let c = caller_of("/nacos/v1/cs/configs", &h, ip("127.0.0.1"));
        assert_eq!((c.reported_ip, c.gray_ip()), (None, ip("127.0.0.1")));
        h.insert("x-real-ip", "9.9.9.9".parse().expect("hv"));
        assert_eq!(reported_ip(&h), ip("9.9.9.9"));
        // X-Forwarded-For first, its first entry (Nacos's WebUtils.getRemoteIp).
        h.insert("x-forwarded-for", " 1.2.3.4 , 5.6.7.8".parse().expect("hv"));
        assert_eq!(reported_ip(&h), ip("1.2.3.4"));
        let c = caller_of("/nacos/v1/cs/configs", &h, ip("127.0.0.1"));
        assert_eq!((c.ip, c.gray_ip()), (ip("127.0.0.1"), ip("1.2.3.4")));
        h.insert("x-forwarded-for", "unknown".parse().expect("hv"));
        assert_eq!(reported_ip(&h), ip("9.9.9.9"));
        h.insert("x-forwarded-for", "::ffff:10.1.2.3".parse().expect("hv"));
        assert_eq!(reported_ip(&h), ip("10.1.2.3"));
    }

    #[test]
    fn caller_protocol_and_app() {
        let mut h = HeaderMap::new();
        h.insert("Client-AppName", " shop ".parse().expect("hv"));
        let c = caller_of("/nacos/v2/cs/config", &h, ip("1.1.1.1"));
        assert_eq!(c.protocol, Protocol::HttpV2);
        assert_eq!(c.app_name.as_deref(), Some("shop"));
        let c = caller_of("/nacos/v1/cs/configs", &HeaderMap::new(), None);
        assert_eq!(c.protocol, Protocol::HttpV1);
        assert_eq!(c.app_name, None);
    }
}
