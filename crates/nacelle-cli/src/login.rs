//! `login` (Nacos's login at the first server that answers, saved as a profile) and
//! `profile list|use`.

use std::io::{BufRead, IsTerminal};

use nacelle_client::{auth, ServerAddr};
use serde_json::json;

use crate::error::{CliError, Result};
use crate::output::{self, Output};
use crate::profile::{Profile, Profiles};
use crate::{Conn, DEFAULT_SERVER};

// `nacelle login`.
#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// Save as this profile (default: the current one, else `default`); it becomes the
    /// current profile.
    #[arg(long = "save-as")]
    save_as: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

// `nacelle profile`.
#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    cmd: ProfileCommand,
    #[command(flatten)]
    conn: Conn,
}

// The profile commands.
#[derive(Debug, clap::Subcommand)]
pub enum ProfileCommand {
    /// List saved profiles (`*` marks the current one).
    List,
    /// Make a profile the current one.
    Use {
        /// Its name.
        name: String,
    },
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) async fn login(a: LoginArgs) -> Result<()> {
    let conn = &a.conn;
    let mut profiles = Profiles::load()?;
    let name = a
        .save_as
        .clone()
        .or_else(|| conn.profile.clone())
        .or_else(|| profiles.current.clone())
        .unwrap_or_else(|| "default".to_string());
    let mut profile = profiles.profiles.get(&name).cloned().unwrap_or_default();
    if !conn.server.is_empty() {
        profile.servers = conn.server.clone();
    }
    if profile.servers.is_empty() {
        profile.servers = vec![DEFAULT_SERVER.to_string()];
    }
    if let Some(ns) = &conn.namespace {
        profile.namespace = nacelle_client::namespace_id(ns).to_string();
    }
    let username = conn
        .username
        .clone()
        .or_else(|| profile.username.clone())
        .ok_or_else(|| CliError::Usage("login needs --username".into()))?;
    let password = match &conn.password {
        Some(p) => p.clone(),
        // On a terminal: asked without echo; else the first line of stdin (scripts).
        None if std::io::stdin().is_terminal() => {
            rpassword::prompt_password(format!("password for {username}: "))
                .map_err(CliError::io("reading the password"))?
        }
        None => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .map_err(CliError::io("reading the password"))?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    let http = reqwest_client()?;
    let mut last: Option<nacelle_client::ClientError> = None;
    let mut answer = None;
    for s in &profile.servers {
        let server = ServerAddr::parse(s)?;
        match auth::login(&http, &server, &username, &password).await {
            Ok(a) => {
                answer = Some(a);
                break;
            }
            Err(e @ nacelle_client::ClientError::Auth(_)) => return Err(e.into()),
            Err(e) => last = Some(e),
        }
    }
    let answer = match (answer, last) {
        (Some(a), _) => a,
        (None, Some(e)) => return Err(e.into()),
        (None, None) => return Err(CliError::Usage("no server to log in to".into())),
    };
    profile.username = Some(username.clone());
    profile.access_token = Some(answer.access_token.clone());
    profile.token_expires_at = Some(now_s() + answer.token_ttl);
    profiles.profiles.insert(name.clone(), profile);
    profiles.current = Some(name.clone());
    let path = profiles.save()?;
    match conn.output {
        Output::Json => output::json(&json!({"profile": name, "username": username,
            "tokenTtl": answer.token_ttl, "file": path.display().to_string()})),
        Output::Table => println!(
            "logged in as {username}; saved profile `{name}` in {} (token valid {} s)",
            path.display(),
            answer.token_ttl
        ),
    }
    Ok(())
}

/// The HTTP client of a login (the client crate's login takes one).
fn reqwest_client() -> Result<nacelle_client::auth::HttpClient> {
    nacelle_client::auth::http_client()
        .map_err(|e| CliError::Usage(format!("cannot build an HTTP client: {e}")))
}

pub(crate) fn profile(a: ProfileArgs) -> Result<()> {
    let mut profiles = Profiles::load()?;
    match a.cmd {
        ProfileCommand::List => {
            let current = profiles.current.as_deref();
            let now = now_s();
            output::list(
                a.conn.output,
                &profiles.profiles,
                &["", "NAME", "SERVERS", "NAMESPACE", "USER", "TOKEN"],
                |(n, p)| profile_json(n, p, current == Some(n)),
                |(n, p)| {
                    let mark = if current == Some(n) { "*" } else { "" };
                    let token = match p.token_expires_at {
                        Some(t) if t > now => format!("valid {} s", t - now),
                        Some(_) => "expired".to_string(),
                        None => "-".to_string(),
                    };
                    vec![
                        mark.to_string(),
                        n.clone(),
                        p.servers.join(","),
                        output::ns_label(&p.namespace).to_string(),
                        p.username.clone().unwrap_or_default(),
                        token,
                    ]
                },
            );
        }
        ProfileCommand::Use { name } => {
            if !profiles.profiles.contains_key(&name) {
                return Err(CliError::NotFound(format!("no profile `{name}`")));
            }
            profiles.current = Some(name.clone());
            profiles.save()?;
            println!("using profile `{name}`");
        }
    }
    Ok(())
}

fn profile_json(name: &str, p: &Profile, current: bool) -> serde_json::Value {
    json!({"name": name, "current": current, "servers": p.servers, "namespace": p.namespace,
           "username": p.username, "tokenExpiresAt": p.token_expires_at})
}
