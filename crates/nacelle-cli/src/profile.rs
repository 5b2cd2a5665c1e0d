//! Saved profiles (like kubectl contexts): `$XDG_CONFIG_HOME/nacelle/profiles.toml`, else
//! `~/.config/nacelle/profiles.toml` — a server list, a namespace, a user and the token
//! of their last login, per profile name; `current` names the one used by default.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{CliError, Result};

/// One profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// Server addresses (`host:port`, or `host:port/grpc_port`).
    #[serde(default)]
    pub servers: Vec<String>,
    /// The namespace (`""`: the default one).
    #[serde(default)]
    pub namespace: String,
    /// Who logged in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The token of that login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    /// When it expires (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_expires_at: Option<u64>,
}

/// The profile file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profiles {
    /// The profile used when `--profile` names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// Profiles by name.
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// The directory of the profile file.
pub fn config_dir() -> Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("nacelle"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".config").join("nacelle")),
        None => Err(CliError::Profile {
            path: "~/.config/nacelle".into(),
            message: "neither XDG_CONFIG_HOME nor HOME is set".into(),
        }),
    }
}

fn file() -> Result<PathBuf> {
    Ok(config_dir()?.join("profiles.toml"))
}

impl Profiles {
    /// Reads the file (none yet: no profiles).
    pub fn load() -> Result<Profiles> {
        let path = file()?;
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Profiles::default()),
            Err(e) => {
                return Err(CliError::Profile {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })
            }
        };
        toml::from_str(&text).map_err(|e| CliError::Profile {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Writes the file (readable by its owner only: it holds tokens).
    pub fn save(&self) -> Result<PathBuf> {
        let path = file()?;
        let fail = |message: String| CliError::Profile {
            path: path.display().to_string(),
            message,
        };
        let text = toml::to_string_pretty(self).map_err(|e| fail(e.to_string()))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        }
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text).map_err(|e| fail(e.to_string()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| fail(e.to_string()))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| fail(e.to_string()))?;
        Ok(path)
    }

    /// The profile `name`, else the current one.
    pub fn pick(&self, name: Option<&str>) -> Result<Option<(String, Profile)>> {
        match name {
            Some(n) => match self.profiles.get(n) {
                Some(p) => Ok(Some((n.to_string(), p.clone()))),
                None => Err(CliError::NotFound(format!(
                    "no profile `{n}` (nacelle login --profile {n} creates it)"
                ))),
            },
            None => Ok(self
                .current
                .as_ref()
                .and_then(|c| self.profiles.get(c).map(|p| (c.clone(), p.clone())))),
        }
    }
}
