//! Nacos's config archives (zip), read and written as Nacos 2.4 does
//! (`ConfigController.exportConfig`/`exportConfigV2`/`importAndPublishConfig`, `ZipUtils`,
//! `ConfigMetadata`):
//! - every config is an entry `{group}/{dataId}` holding its content (UTF-8), deflated;
//! - v1 (`?export=true`) adds `.meta.yml` — only when a config has an app name — with one
//!   line `{group}.{dataId}.app={appName}` per such config, the last `.` of the dataId
//!   written as `~`, lines ended by `\r\n`;
//! - v2 (`?exportV2=true`) adds `.metadata.yml`, a YAML map `metadata:` listing
//!   `{appName, dataId, desc, group, type}` per config (keys in SnakeYAML's alphabetical
//!   order, absent values left out).
//!
//! Reading accepts either layout, and an archive without metadata (Nacos 3.x bug #14785):
//! types then come from the dataId's extension (the service's rule). Directory entries are
//! skipped and entries that are not `{group}/{dataId}` are reported as unrecognized, as
//! Nacos does. Unlike Nacos, a bad archive is refused as a whole before anything is
//! written: see the limits below and `docs/http-api.md`.

use std::collections::{HashMap, HashSet};
use std::io::{Cursor, Read, Write};

use nacelle_service::ConfigView;
use nacelle_service::ImportItem;
use serde::{Deserialize, Serialize};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

/// Largest upload of an import (the whole `multipart/form-data` body), when the server's
/// request limit is smaller.
pub(crate) const MAX_UPLOAD_BYTES: usize = 64 * 1024 * 1024;
/// Most entries (files and directories) an archive may hold.
pub(crate) const MAX_ENTRIES: usize = 20_000;
/// Most bytes all entries of an archive may inflate to, together.
pub(crate) const MAX_INFLATED_BYTES: u64 = 128 * 1024 * 1024;
/// Highest compression ratio (inflated ÷ compressed) of an entry larger than
/// [`RATIO_FLOOR_BYTES`]: real configs deflate 3–20×, a zip bomb thousands of times.
pub(crate) const MAX_RATIO: u64 = 200;
/// Entries up to this size are not held to [`MAX_RATIO`] (a few KiB of repeated text may
/// deflate very well and can do no harm).
pub(crate) const RATIO_FLOOR_BYTES: u64 = 64 * 1024;

/// v1 metadata entry.
pub(crate) const META_V1: &str = ".meta.yml";
/// v2 metadata entry.
pub(crate) const META_V2: &str = ".metadata.yml";

/// Why an archive was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArchiveError {
    /// Not a zip, truncated, corrupt, over a limit, an unsafe name, not UTF-8: Nacos's
    /// `PARSING_DATA_FAILED`.
    #[error("{0}")]
    Invalid(String),
    /// The metadata entry cannot be read: Nacos's `METADATA_ILLEGAL`.
    #[error("{0}")]
    Metadata(String),
}

/// The configs of an archive and what in it was not recognized.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub items: Vec<ImportItem>,
    /// `itemName`s Nacos reports in `unrecognizedData`.
    pub unrecognized: Vec<String>,
}

/// One file of the archive, inflated.
struct Entry {
    name: String,
    text: String,
}

fn invalid(msg: impl Into<String>) -> ArchiveError {
    ArchiveError::Invalid(msg.into())
}

/// Whether an entry name could land outside the archive's folder when unpacked (or is
/// otherwise not a plain relative path): absolute, a drive, `.`/`..` parts, backslashes,
/// control characters.
fn unsafe_name(name: &str) -> bool {
    name.starts_with('/')
        || name.contains('\\')
        || name.chars().any(char::is_control)
        || name.get(1..2) == Some(":")
        || name.split('/').any(|part| part == ".." || part == ".")
}

/// Reads every file of a zip archive, checking the limits while inflating.
fn entries(bytes: &[u8]) -> Result<Vec<Entry>, ArchiveError> {
    let mut zip = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| invalid(format!("not a readable zip archive: {e}")))?;
    if zip.len() > MAX_ENTRIES {
        return Err(invalid(format!(
            "the archive has {} entries (at most {MAX_ENTRIES})",
            zip.len()
        )));
    }
    let mut total: u64 = 0;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut file = zip
            .by_index(i)
            .map_err(|e| invalid(format!("entry {i} cannot be read: {e}")))?;
        let name = file.name().to_string();
        if unsafe_name(&name) {
            return Err(invalid(format!(
                "entry {name:?} is not a plain relative path (absolute or with \"..\")"
            )));
        }
        if file.is_dir() {
            continue;
        }
        let declared = file.size();
        let compressed = file.compressed_size().max(1);
        if declared > MAX_INFLATED_BYTES - total {
            return Err(invalid(format!(
                "the archive inflates to more than {MAX_INFLATED_BYTES} bytes (entry {name:?})"
            )));
        }
        if declared > RATIO_FLOOR_BYTES && declared / compressed > MAX_RATIO {
            return Err(invalid(format!(
                "entry {name:?} is compressed more than {MAX_RATIO}:1 (a zip bomb?)"
            )));
        }
        // Never trust the declared size: read at most one byte more than it and the
        // remaining budget allow, and refuse an entry that inflates beyond either.
        let cap = declared.min(MAX_INFLATED_BYTES - total);
        let mut data = Vec::with_capacity(usize::try_from(cap).unwrap_or(0).min(1 << 20));
        (&mut file)
            .take(cap + 1)
            .read_to_end(&mut data)
            .map_err(|e| invalid(format!("entry {name:?} is corrupt or truncated: {e}")))?;
        let inflated = data.len() as u64;
        if inflated > declared {
            return Err(invalid(format!(
                "entry {name:?} inflates beyond its declared size of {declared} bytes"
            )));
        }
        if inflated > RATIO_FLOOR_BYTES && inflated / compressed > MAX_RATIO {
            return Err(invalid(format!(
                "entry {name:?} is compressed more than {MAX_RATIO}:1 (a zip bomb?)"
            )));
        }
        total += inflated;
        let text = String::from_utf8(data)
            .map_err(|_| invalid(format!("entry {name:?} is not UTF-8 text")))?;
        out.push(Entry { name, text });
    }
    Ok(out)
}

/// An item of `.metadata.yml`. Values are read leniently (a number or boolean becomes
/// its text).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaItemIn {
    group: Option<serde_yaml_ng::Value>,
    data_id: Option<serde_yaml_ng::Value>,
    desc: Option<serde_yaml_ng::Value>,
    r#type: Option<serde_yaml_ng::Value>,
    app_name: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Deserialize)]
struct MetadataIn {
    metadata: Option<Vec<Option<MetaItemIn>>>,
}

fn scalar(v: Option<&serde_yaml_ng::Value>) -> String {
    use serde_yaml_ng::Value;
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    }
}

/// The key of `.meta.yml` for a config: `{group}.{dataId}.app`, the dataId's last `.`
/// written as `~`.
fn meta_v1_key(group: &str, data_id: &str) -> String {
    let data_id = match data_id.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}~{ext}"),
        None => data_id.to_string(),
    };
    format!("{group}.{data_id}.app")
}

/// Splits `{group}/{dataId}`; anything else is not a config entry.
fn config_name(name: &str) -> Option<(&str, &str)> {
    let (group, data_id) = name.split_once('/')?;
    (!group.is_empty() && !data_id.is_empty() && !data_id.contains('/')).then_some((group, data_id))
}

/// Reads an uploaded archive into the configs to import.
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded, ArchiveError> {
    let mut files = entries(bytes)?;
    // The first metadata file of either name is the metadata, as in Nacos's `unzip`.
    let meta_at = files
        .iter()
        .position(|e| e.name == META_V1 || e.name == META_V2);
    let meta = meta_at.map(|i| files.remove(i));
    match meta {
        Some(m) if m.name == META_V2 => decode_v2(&m.text, files),
        Some(m) => decode_v1(Some(&m.text), files),
        None => decode_v1(None, files),
    }
}

/// v1 (or no metadata): every `{group}/{dataId}` entry is a config; `.meta.yml` gives app
/// names.
fn decode_v1(meta: Option<&str>, files: Vec<Entry>) -> Result<Decoded, ArchiveError> {
    let mut apps = HashMap::new();
    for line in meta
        .unwrap_or_default()
        .split(['\r', '\n'])
        .filter(|l| !l.trim().is_empty())
    {
        let parts: Vec<&str> = line.split('=').collect();
        let [key, app] = parts[..] else {
            return Err(ArchiveError::Metadata(format!(
                "{META_V1}: line {line:?} is not `{{group}}.{{dataId}}.app={{appName}}`"
            )));
        };
        apps.insert(key.to_string(), app.to_string());
    }
    let mut out = Decoded::default();
    for f in files {
        let Some((group, data_id)) = config_name(&f.name) else {
            out.unrecognized.push(f.name);
            continue;
        };
        out.items.push(ImportItem {
            group: group.to_string(),
            data_id: data_id.to_string(),
            app_name: apps
                .get(&meta_v1_key(group, data_id))
                .cloned()
                .unwrap_or_default(),
            content: f.text,
            ..ImportItem::default()
        });
    }
    Ok(out)
}

/// v2: `.metadata.yml` lists the configs; entries it does not list and listed configs
/// without an entry are reported as unrecognized, with Nacos's wording.
fn decode_v2(meta: &str, files: Vec<Entry>) -> Result<Decoded, ArchiveError> {
    let parsed: MetadataIn = serde_yaml_ng::from_str(meta)
        .map_err(|e| ArchiveError::Metadata(format!("{META_V2} does not parse: {e}")))?;
    let listed: Vec<MetaItemIn> = parsed
        .metadata
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    if listed.is_empty() {
        return Err(ArchiveError::Metadata(format!(
            "{META_V2} lists no config under `metadata`"
        )));
    }
    let mut keys = HashSet::new();
    for m in &listed {
        let (group, data_id) = (scalar(m.group.as_ref()), scalar(m.data_id.as_ref()));
        if group.trim().is_empty() || data_id.trim().is_empty() {
            return Err(ArchiveError::Metadata(format!(
                "{META_V2}: an item lacks its dataId or group"
            )));
        }
        keys.insert((group, data_id));
    }
    let mut out = Decoded::default();
    let mut contents: HashMap<(String, String), String> = HashMap::new();
    for f in files {
        let Some((group, data_id)) = config_name(&f.name) else {
            out.unrecognized.push(f.name);
            continue;
        };
        let key = (group.to_string(), data_id.to_string());
        if !keys.contains(&key) {
            out.unrecognized
                .push(format!("未在元数据中找到: {}", f.name));
            continue;
        }
        contents.insert(key, f.text);
    }
    for m in listed {
        let (group, data_id) = (scalar(m.group.as_ref()), scalar(m.data_id.as_ref()));
        let Some(content) = contents.remove(&(group.clone(), data_id.clone())) else {
            out.unrecognized
                .push(format!("未在文件中找到: {group}/{data_id}"));
            continue;
        };
        let config_type = scalar(m.r#type.as_ref());
        out.items.push(ImportItem {
            group,
            data_id,
            content,
            config_type: (!config_type.trim().is_empty()).then_some(config_type),
            desc: scalar(m.desc.as_ref()),
            app_name: scalar(m.app_name.as_ref()),
            encrypted_data_key: String::new(),
        });
    }
    Ok(out)
}

/// Which metadata an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `.meta.yml` (`?export=true`).
    V1,
    /// `.metadata.yml` (`?exportV2=true`).
    V2,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetaItemOut<'a> {
    app_name: &'a str,
    data_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    desc: &'a str,
    group: &'a str,
    r#type: &'a str,
}

#[derive(Serialize)]
struct MetadataOut<'a> {
    metadata: Vec<MetaItemOut<'a>>,
}

/// Writes the archive of `configs` (in the given order) in `layout`.
pub(crate) fn encode(configs: &[ConfigView], layout: Layout) -> Result<Vec<u8>, String> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    let put = |zip: &mut ZipWriter<Cursor<Vec<u8>>>, name: &str, data: &[u8]| {
        zip.start_file(name, options)
            .and_then(|()| zip.write_all(data).map_err(Into::into))
            .map_err(|e| format!("writing the archive: {e}"))
    };
    for c in configs {
        let name = format!("{}/{}", c.key().group(), c.key().data_id());
        put(&mut zip, &name, c.content())?;
    }
    match layout {
        Layout::V1 => {
            let mut meta = String::new();
            for c in configs.iter().filter(|c| !c.app_name().trim().is_empty()) {
                meta.push_str(&meta_v1_key(c.key().group(), c.key().data_id()));
                meta.push('=');
                meta.push_str(c.app_name());
                meta.push_str("\r\n");
            }
            if !meta.is_empty() {
                put(&mut zip, META_V1, meta.as_bytes())?;
            }
        }
        Layout::V2 => {
            let metadata = MetadataOut {
                metadata: configs
                    .iter()
                    .map(|c| MetaItemOut {
                        app_name: c.app_name(),
                        data_id: c.key().data_id(),
                        desc: c.desc(),
                        group: c.key().group(),
                        r#type: c.config_type().as_str(),
                    })
                    .collect(),
            };
            let yaml = serde_yaml_ng::to_string(&metadata)
                .map_err(|e| format!("writing {META_V2}: {e}"))?;
            put(&mut zip, META_V2, yaml.as_bytes())?;
        }
    }
    zip.finish()
        .map(Cursor::into_inner)
        .map_err(|e| format!("writing the archive: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_names() {
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "C:/x",
            "a\\b",
            "./a",
            "a/\0",
        ] {
            assert!(unsafe_name(bad), "{bad}");
        }
        for ok in ["G/a.yaml", "DEFAULT_GROUP/", ".meta.yml", "G/a..b"] {
            assert!(!unsafe_name(ok), "{ok}");
        }
    }

    #[test]
    fn v1_meta_keys() {
        assert_eq!(meta_v1_key("G", "a.b.yaml"), "G.a.b~yaml.app");
        assert_eq!(meta_v1_key("G", "plain"), "G.plain.app");
    }
}
