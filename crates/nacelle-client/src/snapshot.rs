//! The snapshot directory: the last content of every listened key, one JSON file per key
//! at `<dir>/<namespace>/<group>/<dataId>.json` (each part percent-encoded, so no name can
//! leave the directory), written atomically (a temporary file renamed over the old one).

use std::path::{Path, PathBuf};

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};

use crate::key::{namespace_label, Key};

/// Everything but letters, digits, `-` and `_` is encoded (`.` too: no `..`).
const PART: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_');

/// One key's saved content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Saved {
    pub(crate) content: String,
    pub(crate) md5: String,
    pub(crate) content_type: String,
    pub(crate) last_modified: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    dir: PathBuf,
}

impl Snapshot {
    pub(crate) fn new(dir: &Path) -> Snapshot {
        Snapshot {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self, key: &Key) -> PathBuf {
        let ns = namespace_label(&key.namespace);
        let enc = |s: &str| utf8_percent_encode(s, PART).to_string();
        self.dir
            .join(enc(ns))
            .join(enc(&key.group))
            .join(format!("{}.json", enc(&key.data_id)))
    }

    /// The saved content of `key`, if any (an unreadable file is logged and ignored).
    pub(crate) fn load(&self, key: &Key) -> Option<Saved> {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the snapshot");
                return None;
            }
        };
        match serde_json::from_slice(&bytes) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring a broken snapshot file");
                None
            }
        }
    }

    /// Saves `key`'s content (`None`: the key is gone, its file removed).
    pub(crate) fn store(&self, key: &Key, saved: Option<&Saved>) -> std::io::Result<()> {
        let path = self.path(key);
        let Some(saved) = saved else {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        };
        let parent = path
            .parent()
            .ok_or_else(|| std::io::Error::other("snapshot path without a parent"))?;
        std::fs::create_dir_all(parent)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(saved).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, &path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside_the_directory() -> std::io::Result<()> {
        let dir = std::env::temp_dir().join(format!("nacelle-snap-{}", std::process::id()));
        let snap = Snapshot::new(&dir);
        let key = Key::new("", "..", "../../x");
        assert!(snap.path(&key).starts_with(&dir));
        assert_eq!(snap.load(&key), None);
        let saved = Saved {
            content: "a: 1".into(),
            md5: "m".into(),
            content_type: "yaml".into(),
            last_modified: 1,
        };
        snap.store(&key, Some(&saved))?;
        assert_eq!(snap.load(&key), Some(saved));
        snap.store(&key, None)?;
        assert_eq!(snap.load(&key), None);
        std::fs::remove_dir_all(&dir)
    }
}
