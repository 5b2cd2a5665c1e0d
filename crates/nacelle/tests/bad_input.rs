//! Malformed requests, one table row each, against one server over real HTTP: every row
//! gets its 4xx in the protocol's error format (v1 plain text `caused: …;`, v2 the
//! `{code, message, data}` envelope), and the server keeps serving afterwards. Run on
//! SQLite, MariaDB and PostgreSQL (`per_backend!`): the same table, except that a value with
//! a NUL character is stored where the database can hold one and a 400 on PostgreSQL.

use nacelle_testkit::server::TestServer;
use nacelle_testkit::{listening_configs, per_backend, Backend, TestResult};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::Method;

/// Content limit of the server under test.
const MAX_CONTENT: usize = 1024;
/// Request limit of the server under test.
const MAX_REQUEST: usize = 64 * 1024;
/// Most keys in one long poll.
const MAX_LISTEN_KEYS: usize = 3;

const FORM: &str = "application/x-www-form-urlencoded";

/// What the body of an answer must show.
#[derive(Debug)]
enum Expect {
    /// v1 plain text: `caused: …;` containing this.
    V1(&'static str),
    /// v2 JSON envelope with this code and a `data` containing this.
    V2(i64, &'static str),
    /// Any body containing this (success rows, answers of the HTTP layer itself).
    Body(&'static str),
}

#[derive(Debug)]
struct Row {
    name: &'static str,
    method: Method,
    /// Path and query, already encoded.
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    status: u16,
    expect: Expect,
}

/// `application/x-www-form-urlencoded` encoding of `pairs` (also used for query strings).
fn enc(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(v, NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn get(name: &'static str, path: &str, query: &[(&str, &str)], status: u16, expect: Expect) -> Row {
    Row {
        name,
        method: Method::GET,
        path: format!("{path}?{}", enc(query)),
        headers: vec![],
        body: vec![],
        status,
        expect,
    }
}

fn with_form(
    name: &'static str,
    method: Method,
    path: &str,
    form: &[(&str, &str)],
    status: u16,
    expect: Expect,
) -> Row {
    raw_form(name, method, path, enc(form).into_bytes(), status, expect)
}

fn raw_form(
    name: &'static str,
    method: Method,
    path: &str,
    body: Vec<u8>,
    status: u16,
    expect: Expect,
) -> Row {
    Row {
        name,
        method,
        path: path.to_string(),
        headers: vec![("Content-Type", FORM.to_string())],
        body,
        status,
        expect,
    }
}

fn with_query(
    name: &'static str,
    method: Method,
    path: &str,
    query: &[(&str, &str)],
    status: u16,
    expect: Expect,
) -> Row {
    Row {
        name,
        method,
        path: format!("{path}?{}", enc(query)),
        headers: vec![],
        body: vec![],
        status,
        expect,
    }
}

/// A v1 publish of `row` with `extra` replacing or adding form fields.
fn publish(name: &'static str, extra: &[(&str, &str)], status: u16, expect: Expect) -> Row {
    let mut form = vec![("dataId", "row"), ("group", G), ("content", "v")];
    for (k, v) in extra {
        form.retain(|(fk, _)| fk != k);
        form.push((k, v));
    }
    with_form(name, Method::POST, CONFIGS, &form, status, expect)
}

fn listener(name: &'static str, records: &str, timeout: Option<&str>, expect: &'static str) -> Row {
    let mut row = with_form(
        name,
        Method::POST,
        LISTENER,
        &[("Listening-Configs", records)],
        400,
        Expect::V1(expect),
    );
    if let Some(t) = timeout {
        row.headers.push(("Long-Pulling-Timeout", t.to_string()));
    }
    row
}

const CONFIGS: &str = "/nacos/v1/cs/configs";
const LISTENER: &str = "/nacos/v1/cs/configs/listener";
const HISTORY: &str = "/nacos/v1/cs/history";
const NAMESPACES: &str = "/nacos/v1/console/namespaces";
const V2: &str = "/nacos/v2/cs/config";
const G: &str = "DEFAULT_GROUP";

/// The answer to a value holding a NUL character: stored on SQLite and MySQL, a 400 on
/// PostgreSQL, whose text cannot hold one (`docs/storage.md`).
fn nul_answer(backend: Backend, v2: bool) -> (u16, Expect) {
    match (backend, v2) {
        (Backend::Postgres, false) => (400, Expect::V1("NUL character")),
        (Backend::Postgres, true) => (400, Expect::V2(20002, "NUL character")),
        (_, false) => (200, Expect::Body("true")),
        (_, true) => (200, Expect::Body("\"data\":true")),
    }
}

fn table(backend: Backend) -> Vec<Row> {
    let long_data_id = "d".repeat(256);
    let long_group = "g".repeat(129);
    let long_tenant = "t".repeat(129);
    let long_tag = "x".repeat(17);
    let long_type = "y".repeat(65);
    let big_content = "c".repeat(MAX_CONTENT + 1);
    let huge_body = format!(
        "dataId=huge&group={G}&content={}",
        "h".repeat(MAX_REQUEST + 1024)
    );
    let md5 = nacelle_testkit::md5("v");
    let too_many: Vec<(String, String)> = (0..=MAX_LISTEN_KEYS)
        .map(|i| (format!("k{i}"), md5.clone()))
        .collect();
    let too_many_records: Vec<(&str, &str, &str, Option<&str>)> = too_many
        .iter()
        .map(|(d, m)| (d.as_str(), G, m.as_str(), None))
        .collect();
    vec![
        // ---- names and lengths
        get(
            "dataId of 256 characters",
            CONFIGS,
            &[("dataId", &long_data_id), ("group", G)],
            400,
            Expect::V1("invalid dataId"),
        ),
        get(
            "dataId with a slash",
            CONFIGS,
            &[("dataId", "a/b"), ("group", G)],
            400,
            Expect::V1("invalid dataId : a/b"),
        ),
        publish(
            "publish with a blank dataId",
            &[("dataId", " ")],
            400,
            Expect::V1("invalid dataId"),
        ),
        publish(
            "group of 129 characters",
            &[("group", &long_group)],
            400,
            Expect::V1("invalid group"),
        ),
        get(
            "group with a space",
            CONFIGS,
            &[("dataId", "a"), ("group", "my group")],
            400,
            Expect::V1("invalid group"),
        ),
        get(
            "tenant of 129 characters",
            CONFIGS,
            &[("dataId", "a"), ("group", G), ("tenant", &long_tenant)],
            400,
            Expect::V1("too long tenant"),
        ),
        publish(
            "tenant with illegal characters",
            &[("tenant", "dev$ns")],
            400,
            Expect::V1("invalid tenant : dev$ns"),
        ),
        get(
            "tag of 17 characters on get",
            CONFIGS,
            &[("dataId", "a"), ("group", G), ("tag", &long_tag)],
            400,
            Expect::V1("invalid tag"),
        ),
        publish(
            "tag of 17 characters on publish",
            &[("tag", &long_tag)],
            400,
            Expect::V1("invalid tag"),
        ),
        // ---- missing parameters
        get(
            "get without dataId",
            CONFIGS,
            &[("group", G)],
            400,
            Expect::V1("'dataId'"),
        ),
        get(
            "get without group",
            CONFIGS,
            &[("dataId", "a")],
            400,
            Expect::V1("'group'"),
        ),
        with_form(
            "publish without content",
            Method::POST,
            CONFIGS,
            &[("dataId", "a"), ("group", G)],
            400,
            Expect::V1("'content'"),
        ),
        with_form(
            "publish without dataId",
            Method::POST,
            CONFIGS,
            &[("group", G), ("content", "v")],
            400,
            Expect::V1("'dataId'"),
        ),
        with_query(
            "delete without dataId",
            Method::DELETE,
            CONFIGS,
            &[("group", G)],
            400,
            Expect::V1("'dataId'"),
        ),
        with_query(
            "delete without group",
            Method::DELETE,
            CONFIGS,
            &[("dataId", "a")],
            400,
            Expect::V1("'group'"),
        ),
        publish(
            "blank content",
            &[("content", " \n\t ")],
            400,
            Expect::V1("content is blank"),
        ),
        // ---- sizes
        publish(
            "content over max_content_bytes",
            &[("content", &big_content)],
            413,
            Expect::V1("too long content, over 1024 bytes"),
        ),
        raw_form(
            "body over max_request_bytes",
            Method::POST,
            CONFIGS,
            huge_body.into_bytes(),
            413,
            Expect::V1("too large"),
        ),
        publish(
            "desc of 129 characters",
            &[("desc", &"d".repeat(129))],
            400,
            Expect::V1("invalid desc : too long, over 128"),
        ),
        publish(
            "six config_tags",
            &[("config_tags", "a,b,c,d,e,f")],
            400,
            Expect::V1("too many config_tags, over 5"),
        ),
        publish(
            "appName of 129 characters",
            &[("appName", &"a".repeat(129))],
            400,
            Expect::V1("invalid appName : too long"),
        ),
        with_query(
            "PUT is not a method of configs",
            Method::PUT,
            CONFIGS,
            &[("dataId", "a"), ("group", G)],
            405,
            Expect::Body(""),
        ),
        // ---- long polling (a POST of exactly this path is answered past the router)
        with_form(
            "PUT is not a method of the listener",
            Method::PUT,
            LISTENER,
            &[("Listening-Configs", "a\u{2}DEFAULT_GROUP\u{2}\u{1}")],
            405,
            Expect::Body(""),
        ),
        with_form(
            "a long poll on the listener's path with a trailing slash",
            Method::POST,
            "/nacos/v1/cs/configs/listener/",
            &[("Listening-Configs", "a\u{2}DEFAULT_GROUP\u{2}\u{1}")],
            404,
            Expect::V1("no such API"),
        ),
        listener(
            "Listening-Configs record of two fields",
            "a\u{2}DEFAULT_GROUP\u{1}",
            Some("30000"),
            "has 2 fields",
        ),
        listener(
            "Listening-Configs record of five fields",
            "a\u{2}G\u{2}\u{2}ns\u{2}extra\u{1}",
            Some("30000"),
            "has 5 fields",
        ),
        listener(
            "Listening-Configs md5 not hex",
            &listening_configs(&[("a", G, "not-an-md5", None)]),
            Some("30000"),
            "is not hex",
        ),
        listener(
            "Listening-Configs invalid dataId inside",
            &listening_configs(&[("bad id", G, "", None)]),
            Some("30000"),
            "invalid dataId : bad id",
        ),
        listener(
            "Listening-Configs invalid tenant inside",
            &listening_configs(&[("a", G, "", Some("bad/ns"))]),
            Some("30000"),
            "invalid tenant",
        ),
        listener(
            "Listening-Configs empty",
            "",
            Some("30000"),
            "has no record",
        ),
        listener(
            "Listening-Configs over max_listen_keys",
            &listening_configs(&too_many_records),
            Some("30000"),
            "too many listening configs, over 3",
        ),
        with_form(
            "listener without Listening-Configs",
            Method::POST,
            LISTENER,
            &[("tenant", "")],
            400,
            Expect::V1("'Listening-Configs'"),
        ),
        listener(
            "Long-Pulling-Timeout not a number",
            &listening_configs(&[("a", G, "", None)]),
            Some("soon"),
            "invalid Long-Pulling-Timeout header : soon",
        ),
        // ---- pagination and search
        get(
            "search pageNo=0",
            CONFIGS,
            &[
                ("search", "accurate"),
                ("dataId", ""),
                ("group", ""),
                ("pageNo", "0"),
            ],
            400,
            Expect::V1("invalid pageNo : 0"),
        ),
        get(
            "search pageNo=-1",
            CONFIGS,
            &[("search", "blur"), ("pageNo", "-1"), ("pageSize", "10")],
            400,
            Expect::V1("invalid pageNo : -1"),
        ),
        get(
            "search pageSize=abc",
            CONFIGS,
            &[("search", "accurate"), ("pageNo", "1"), ("pageSize", "abc")],
            400,
            Expect::V1("invalid pageSize : abc"),
        ),
        get(
            "search pageSize over a Java int",
            CONFIGS,
            &[
                ("search", "accurate"),
                ("pageNo", "1"),
                ("pageSize", "2147483648"),
            ],
            400,
            Expect::V1("invalid pageSize : 2147483648"),
        ),
        get(
            "search pageSize=1000 is fine (Python client's get_configs default)",
            CONFIGS,
            &[
                ("search", "accurate"),
                ("dataId", ""),
                ("group", ""),
                ("pageNo", "1"),
                ("pageSize", "1000"),
            ],
            200,
            Expect::Body("\"pageItems\""),
        ),
        get(
            "unknown search mode",
            CONFIGS,
            &[("search", "fuzzy"), ("pageNo", "1"), ("pageSize", "10")],
            400,
            Expect::V1("invalid search : fuzzy"),
        ),
        get(
            "search with an illegal tenant",
            CONFIGS,
            &[("search", "accurate"), ("tenant", "a b")],
            400,
            Expect::V1("invalid tenant"),
        ),
        get(
            "history pageNo=0",
            HISTORY,
            &[
                ("search", "accurate"),
                ("dataId", "a"),
                ("group", G),
                ("pageNo", "0"),
            ],
            400,
            Expect::V1("invalid pageNo : 0"),
        ),
        get(
            "history pageSize=-1",
            HISTORY,
            &[
                ("search", "accurate"),
                ("dataId", "a"),
                ("group", G),
                ("pageSize", "-1"),
            ],
            400,
            Expect::V1("invalid pageSize : -1"),
        ),
        get(
            "history pageSize=abc",
            HISTORY,
            &[
                ("search", "accurate"),
                ("dataId", "a"),
                ("group", G),
                ("pageSize", "abc"),
            ],
            400,
            Expect::V1("invalid pageSize : abc"),
        ),
        get(
            "history pageNo over a Java int",
            HISTORY,
            &[
                ("search", "accurate"),
                ("dataId", "a"),
                ("group", G),
                ("pageNo", "99999999999"),
            ],
            400,
            Expect::V1("invalid pageNo : 99999999999"),
        ),
        get(
            "history pageSize=501 is clamped to 500, as Nacos does",
            HISTORY,
            &[
                ("search", "accurate"),
                ("dataId", "a"),
                ("group", G),
                ("pageSize", "501"),
            ],
            200,
            Expect::Body("\"totalCount\":0"),
        ),
        get(
            "history nid not a number",
            HISTORY,
            &[("dataId", "a"), ("group", G), ("nid", "12x")],
            400,
            Expect::V1("invalid nid : 12x"),
        ),
        get(
            "history previous id not a number",
            "/nacos/v1/cs/history/previous",
            &[("dataId", "a"), ("group", G), ("id", "abc")],
            400,
            Expect::V1("invalid id : abc"),
        ),
        // ---- encoding
        raw_form(
            "form body with %FF",
            Method::POST,
            CONFIGS,
            format!("dataId=a&group={G}&content=%FF%FE").into_bytes(),
            400,
            Expect::V1("not valid UTF-8"),
        ),
        raw_form(
            "form body with raw invalid UTF-8 bytes",
            Method::POST,
            CONFIGS,
            b"dataId=a&group=DEFAULT_GROUP&content=ok\xff\xfe".to_vec(),
            400,
            Expect::V1("not valid UTF-8"),
        ),
        Row {
            name: "query with %FF",
            method: Method::GET,
            path: format!("{CONFIGS}?dataId=a%FF&group={G}"),
            headers: vec![],
            body: vec![],
            status: 400,
            expect: Expect::V1("not valid UTF-8"),
        },
        // ---- type
        publish(
            "type with markup",
            &[("type", "<script>")],
            400,
            Expect::V1("invalid type : <script>"),
        ),
        publish(
            "type of 65 characters",
            &[("type", &long_type)],
            400,
            Expect::V1("invalid type"),
        ),
        publish(
            "well-formed unknown type is text, not an error",
            &[("dataId", "bogus-type"), ("type", "bogus")],
            200,
            Expect::Body("true"),
        ),
        // ---- NUL characters: stored where the database can hold them, else a 400
        {
            let (status, expect) = nul_answer(backend, false);
            publish(
                "content with a NUL character",
                &[("dataId", "nul-content"), ("content", "a\0b")],
                status,
                expect,
            )
        },
        {
            let (status, expect) = nul_answer(backend, false);
            publish(
                "desc with a NUL character",
                &[("dataId", "nul-desc"), ("desc", "d\0")],
                status,
                expect,
            )
        },
        {
            let (status, expect) = nul_answer(backend, true);
            with_form(
                "v2 publish of content with a NUL character",
                Method::POST,
                V2,
                &[("dataId", "nul-v2"), ("group", G), ("content", "\0")],
                status,
                expect,
            )
        },
        {
            let (status, expect) = nul_answer(backend, false);
            with_form(
                "namespace name with a NUL character",
                Method::POST,
                NAMESPACES,
                &[("customNamespaceId", "nul"), ("namespaceName", "n\0")],
                status,
                expect,
            )
        },
        // ---- v2
        get(
            "v2 get without dataId",
            V2,
            &[("group", G)],
            400,
            Expect::V2(10000, "'dataId'"),
        ),
        get(
            "v2 get with an invalid group",
            V2,
            &[("dataId", "a"), ("group", "a/b")],
            400,
            Expect::V2(20002, "invalid group"),
        ),
        get(
            "v2 get of a missing config",
            V2,
            &[("dataId", "nothing-here"), ("group", G)],
            404,
            Expect::V2(20004, "config data not exist"),
        ),
        raw_form(
            "v2 publish with invalid UTF-8",
            Method::POST,
            V2,
            format!("dataId=a&group={G}&content=%C3%28").into_bytes(),
            400,
            Expect::V2(20002, "not valid UTF-8"),
        ),
        with_form(
            "v2 publish with an illegal namespaceId",
            Method::POST,
            V2,
            &[
                ("dataId", "a"),
                ("group", G),
                ("namespaceId", "a b"),
                ("content", "v"),
            ],
            400,
            Expect::V2(20002, "invalid tenant"),
        ),
        with_form(
            "v2 publish of content over max_content_bytes",
            Method::POST,
            V2,
            &[
                ("dataId", "a"),
                ("group", G),
                ("content", &"c".repeat(MAX_CONTENT + 1)),
            ],
            413,
            Expect::V2(20002, "too long content"),
        ),
        with_query(
            "v2 delete without group",
            Method::DELETE,
            V2,
            &[("dataId", "a")],
            400,
            Expect::V2(10000, "'group'"),
        ),
        // ---- namespaces
        // Namespace ids follow the tenant rules (letters, digits, `_-.:`), so `dev.ns` is a
        // valid id; `/` is valid in neither.
        with_form(
            "namespace with an illegal id",
            Method::POST,
            NAMESPACES,
            &[("customNamespaceId", "dev/ns"), ("namespaceName", "dev")],
            400,
            Expect::V1("illegal namespace id"),
        ),
        with_form(
            "namespace id `null` (a client's word for the default namespace)",
            Method::POST,
            NAMESPACES,
            &[("customNamespaceId", "null"), ("namespaceName", "n")],
            400,
            Expect::V1("reserved"),
        ),
        with_form(
            "namespace id `public`",
            Method::POST,
            NAMESPACES,
            &[("customNamespaceId", "public"), ("namespaceName", "n")],
            400,
            Expect::V1("reserved"),
        ),
        with_form(
            "namespace with a blank name",
            Method::POST,
            NAMESPACES,
            &[("customNamespaceId", "dev"), ("namespaceName", "  ")],
            400,
            Expect::V1("namespaceName is required"),
        ),
        with_query(
            "delete of the default namespace (blank id)",
            Method::DELETE,
            NAMESPACES,
            &[("namespaceId", "")],
            400,
            Expect::V1("default namespace cannot be deleted"),
        ),
        with_query(
            "delete of the default namespace (public)",
            Method::DELETE,
            NAMESPACES,
            &[("namespaceId", "public")],
            400,
            Expect::V1("default namespace cannot be deleted"),
        ),
        // ---- delete by ids
        with_query(
            "delType=ids with garbage ids",
            Method::DELETE,
            CONFIGS,
            &[("delType", "ids"), ("ids", "1,two,3")],
            400,
            Expect::V1("invalid ids : 1,two,3"),
        ),
        with_query(
            "delType=ids with empty ids",
            Method::DELETE,
            CONFIGS,
            &[("delType", "ids"), ("ids", ",")],
            400,
            Expect::V1("invalid ids"),
        ),
    ]
}

/// Sends one row; returns a description of what went wrong, if anything.
async fn check(ts: &TestServer, row: &Row) -> TestResult<Option<String>> {
    let mut req = ts.http.request(row.method.clone(), ts.url(&row.path));
    for (k, v) in &row.headers {
        req = req.header(*k, v);
    }
    if !row.body.is_empty() {
        req = req.body(row.body.clone());
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let body = resp.text().await?;
    let shown: String = body.chars().take(300).collect();
    if status != row.status {
        return Ok(Some(format!(
            "expected status {}, got {status}: {shown}",
            row.status
        )));
    }
    let problem = match &row.expect {
        Expect::V1(needle) => {
            if !(body.starts_with("caused: ") && body.ends_with(';')) {
                Some(format!("not a v1 error body `caused: …;`: {shown}"))
            } else if !body.contains(needle) {
                Some(format!("body lacks {needle:?}: {shown}"))
            } else {
                None
            }
        }
        Expect::V2(code, needle) => match serde_json::from_str::<serde_json::Value>(&body) {
            Err(e) => Some(format!("not JSON ({e}): {shown}")),
            Ok(v) => {
                let data = v["data"].as_str().unwrap_or_default();
                if v["code"].as_i64() != Some(*code) {
                    Some(format!("expected v2 code {code}: {shown}"))
                } else if !v["message"].is_string() {
                    Some(format!("v2 envelope lacks a message: {shown}"))
                } else if !data.contains(needle) {
                    Some(format!("v2 data lacks {needle:?}: {shown}"))
                } else {
                    None
                }
            }
        },
        Expect::Body(needle) => {
            (!body.contains(needle)).then(|| format!("body lacks {needle:?}: {shown}"))
        }
    };
    Ok(problem)
}

/// Sends raw HTTP/1.1 bytes (for what reqwest refuses to build: URLs over 64 KiB, chunked
/// bodies) and returns the status and body of the answer.
async fn raw_http(ts: &TestServer, head: String, body: &[u8]) -> TestResult<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(ts.addr).await?;
    stream.write_all(head.as_bytes()).await?;
    // The server may answer and close before reading all of an oversized body.
    if let Err(e) = stream.write_all(body).await {
        println!("writing the body stopped early: {e}");
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.read_to_end(&mut answer),
    );
    if let Err(e) = read.await? {
        if answer.is_empty() {
            return Err(format!("no answer: {e}").into());
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| {
            format!(
                "not an HTTP answer: {}",
                text.chars().take(200).collect::<String>()
            )
        })?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

per_backend!(
    malformed_requests_get_4xx_and_the_server_keeps_serving,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn malformed_requests_get_4xx_and_the_server_keeps_serving(backend: Backend) -> TestResult {
    let ts = TestServer::start_with_on(backend, |s| {
        s.max_content_bytes = MAX_CONTENT;
        s.max_request_bytes = MAX_REQUEST;
        s.max_listen_keys = MAX_LISTEN_KEYS;
    })
    .await?;

    let rows = table(backend);
    let error_rows = rows
        .iter()
        .filter(|r| (400..500).contains(&r.status))
        .count();
    assert!(
        error_rows >= 25,
        "the table has only {error_rows} error rows"
    );

    let mut failures = Vec::new();
    for row in &rows {
        match check(&ts, row).await {
            Ok(None) => println!("ok   {} {} → {}", row.method, row.name, row.status),
            Ok(Some(problem)) => failures.push(format!("{} {}: {problem}", row.method, row.name)),
            Err(e) => {
                let e: String = e.to_string().chars().take(300).collect();
                failures.push(format!("{} {}: request failed: {e}", row.method, row.name))
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );

    // A URL over max_request_bytes (reqwest cannot even build one): 414 from the HTTP layer.
    let head = format!(
        "GET {CONFIGS}?dataId=a&group={G}&pad={} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "p".repeat(MAX_REQUEST + 1024)
    );
    let (status, _) = raw_http(&ts, head, b"").await?;
    assert_eq!(status, 414, "URL over max_request_bytes");

    // A chunked body (no Content-Length) over max_request_bytes: 413 while streaming.
    let mut chunked = Vec::new();
    let form = format!("dataId=chunked&group={G}&content=");
    for chunk in std::iter::once(form.into_bytes()).chain((0..20).map(|_| vec![b'c'; 4096])) {
        chunked.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        chunked.extend_from_slice(&chunk);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = format!(
        "POST {CONFIGS} HTTP/1.1\r\nHost: x\r\nContent-Type: {FORM}\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let (status, body) = raw_http(&ts, head, &chunked).await?;
    assert_eq!(status, 413, "chunked body over max_request_bytes: {body}");
    assert!(body.contains("caused: request body too large"), "{body}");

    // The well-formed unknown type was stored as text.
    let resp = ts
        .http
        .get(ts.url(CONFIGS))
        .query(&[("dataId", "bogus-type"), ("group", G)])
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    let config_type = resp
        .headers()
        .get("Config-Type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    assert_eq!(config_type.as_deref(), Some("text"));

    // Nothing the table sent was stored.
    for data_id in ["row", "a", "huge", "chunked"] {
        assert_eq!(ts.get("", G, data_id).await?, None, "{data_id} was stored");
    }
    // A NUL character round-trips where the database holds it, and nothing of it was
    // written where it cannot.
    let expected = (backend != Backend::Postgres).then_some("a\0b");
    assert_eq!(ts.get("", G, "nul-content").await?.as_deref(), expected);

    // And the server keeps serving.
    ts.publish("", G, "after-the-table", "still: serving")
        .await?;
    assert_eq!(
        ts.get("", G, "after-the-table").await?.as_deref(),
        Some("still: serving")
    );
    let resp = ts
        .http
        .get(ts.url("/nacos/v1/console/health/readiness"))
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    Ok(())
}
