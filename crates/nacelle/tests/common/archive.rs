//! Zip archives and multipart bodies as the import/export tests build and read them, and
//! the v1 import that sends them.

use std::io::{Cursor, Read, Write};

use nacelle_testkit::{Api, TestResult};
use serde_json::Value;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

/// An entry of a zip built by a test: (name, bytes); a name ending in `/` is a directory.
pub type Entry<'a> = (&'a str, &'a [u8]);

/// A zip in the layout Java's `ZipOutputStream` writes (deflated entries).
pub fn zip_of(entries: &[Entry<'_>]) -> TestResult<Vec<u8>> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    for (name, data) in entries {
        if let Some(dir) = name.strip_suffix('/') {
            zip.add_directory(dir, opts)?;
        } else {
            zip.start_file(*name, opts)?;
            zip.write_all(data)?;
        }
    }
    Ok(zip.finish()?.into_inner())
}

/// Every entry of an archive: name → text, in archive order.
pub fn unzip(bytes: &[u8]) -> TestResult<Vec<(String, String)>> {
    let mut zip = ZipArchive::new(Cursor::new(bytes))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i)?;
        let mut text = String::new();
        f.read_to_string(&mut text)?;
        out.push((f.name().to_string(), text));
    }
    Ok(out)
}

/// A `multipart/form-data` body with a `file` part (when given) and text parts.
pub fn multipart(file: Option<&[u8]>, fields: &[(&str, &str)]) -> (String, Vec<u8>) {
    let boundary = "----nacelle-test-boundary-7d1f";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    if let Some(file) = file {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"export.zip\"\r\nContent-Type: application/zip\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(file);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// `POST /nacos/v1/cs/configs?import=true` with `zip` into `namespace` under `policy`
/// (none: the default), through `api` (a client with a token where authentication is on):
/// (status, body as JSON).
pub async fn import(
    api: &Api,
    namespace: &str,
    policy: Option<&str>,
    zip: Option<&[u8]>,
) -> TestResult<(u16, Value)> {
    let mut fields = vec![("namespace", namespace)];
    if let Some(p) = policy {
        fields.push(("policy", p));
    }
    let (ct, body) = multipart(zip, &fields);
    let r = api
        .http
        .post(api.url("/nacos/v1/cs/configs?import=true"))
        .header("Content-Type", ct)
        .body(body)
        .send()
        .await?;
    let status = r.status().as_u16();
    let text = r.text().await?;
    let v = serde_json::from_str(&text).map_err(|e| format!("{status} {text}: {e}"))?;
    Ok((status, v))
}
