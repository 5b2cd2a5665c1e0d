//! The operator commands of the `nacelle` binary, beside `serve`: `get`, `put`, `rm`,
//! `ls`/`search`, `watch`, `history`, `diff`, `rollback`, `ns`, `export`, `import`,
//! `gray`, `change`, `policy`, `clients`, `rollout`, `user`, `role`, `perm`, `schema`,
//! `audit`, `webhook`, `login`, `profile` and `completion`. Built on `nacelle-client` only (gRPC for configs,
//! its HTTP admin calls for the rest); `docs/cli.md` is the manual.
//!
//! # Layout
//! - `lib.rs`: [`Command`] (the clap subcommands, flattened into the binary's), [`run`],
//!   the connection flags ([`Conn`]) and how they resolve against a saved profile.
//! - `configs.rs`: get, put, rm, ls, watch. `versions.rs`: history, diff, rollback.
//!   `admin.rs`: ns, export, import. `gray.rs`: gray ls/create/promote/stop.
//!   `changes.rs`: change requests and review policies.
//!   `rollouts.rs`: staged rollouts.
//!   `users.rs`: user, role, perm. `schemas.rs`: schema set/get/ls/rm/check.
//!   `audit.rs`: audit ls/verify. `webhooks.rs`: webhook add/ls/rm/deliveries/redeliver.
//!   `login.rs`: login, profile.
//! - `profile.rs`: the profile file. `output.rs`: tables and JSON. `input.rs`: content
//!   from a file or stdin. `error.rs`:
//!   [`CliError`] and the exit codes ([`exit`]).
//!
//! The help is for users: each command's text is its enum variant's doc comment, each
//! flag's its field's. The clap types themselves carry `//` comments, since clap would take
//! a type's doc comment as the help of the command it is added to.

mod admin;
mod audit;
mod changes;
mod clients;
mod configs;
mod error;
mod gray;
mod input;
mod login;
pub mod output;
pub mod profile;
mod rollouts;
mod schemas;
mod users;
mod versions;
mod webhooks;

use std::time::Duration;

use nacelle_client::{Client, DEFAULT_GROUP};

pub use error::{exit, CliError, Result};
pub use output::Output;

// How to reach the server; every client command takes these flags (`global`: also
// after a nested subcommand, as in `nacelle ns list -s host:8848`, and — with
// `global_flags` on the binary's top command — before the command, as in
// `nacelle -n dev ls`). Its `Debug` leaves the password out. (A `//` comment, as on every
// clap type: as a doc comment it would open `nacelle --help`.)
#[derive(Clone, clap::Args)]
pub struct Conn {
    /// Server `host:port` (its HTTP port; gRPC on port + 1000), or `host:port/grpc_port`;
    /// several (repeated or comma-separated) for failover. Default: the profile's, else
    /// 127.0.0.1:8848.
    #[arg(
        long,
        short = 's',
        env = "NACELLE_SERVER",
        value_delimiter = ',',
        global = true
    )]
    pub server: Vec<String>,
    /// Namespace id (default: the profile's, else the public namespace).
    #[arg(long, short = 'n', env = "NACELLE_NAMESPACE", global = true)]
    pub namespace: Option<String>,
    /// The saved profile to use (default: the current one, set by `nacelle login`).
    #[arg(long, env = "NACELLE_PROFILE", global = true)]
    pub profile: Option<String>,
    /// Log in as this user (with --password) instead of the profile's token.
    #[arg(long, env = "NACELLE_USERNAME", global = true)]
    pub username: Option<String>,
    /// The password of --username.
    #[arg(long, env = "NACELLE_PASSWORD", hide_env_values = true, global = true)]
    pub password: Option<String>,
    /// Output: `table` for people, `json` for scripts.
    #[arg(long, short = 'o', value_enum, default_value = "table", global = true)]
    pub output: Output,
    /// How long to wait for a server, in milliseconds.
    #[arg(long, default_value_t = 3000, global = true)]
    pub timeout_ms: u64,
    /// How to talk to the server.
    #[arg(
        long,
        value_enum,
        default_value = "grpc",
        env = "NACELLE_TRANSPORT",
        global = true
    )]
    pub transport: TransportArg,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("server", &self.server)
            .field("namespace", &self.namespace)
            .field("profile", &self.profile)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("output", &self.output)
            .field("timeout_ms", &self.timeout_ms)
            .field("transport", &self.transport)
            .finish()
    }
}

/// The ids of [`Conn`]'s arguments.
fn conn_ids() -> Vec<clap::Id> {
    use clap::Args;
    Conn::augment_args(clap::Command::new("conn"))
        .get_arguments()
        .map(|a| a.get_id().clone())
        .collect()
}

/// `top` (the binary's command) taking the client flags before the subcommand too
/// (`nacelle -n dev ls`, `nacelle -s host:8848 -o json get app.yaml`), as kubectl and
/// etcdctl users type them. They are added to `top` as global arguments with the ids of
/// each client command's own [`Conn`], so clap hands their values down to it (a flag
/// after the command wins over the same flag before it); hidden there, since each client
/// command lists them in its own help. Commands that are not client commands (`serve`)
/// see them too, which is why the binary refuses them there ([`client_flag_given`]).
pub fn global_flags(top: clap::Command) -> clap::Command {
    use clap::Args;
    let mut top = Conn::augment_args(top).after_help(
        "Client flags (-s/--server, -n/--namespace, -o/--output, --profile, --username, \
         --password, --timeout-ms, --transport) may come before the client command too: \
         `nacelle -n dev ls`.",
    );
    for id in conn_ids() {
        top = top.mut_arg(id, |a| a.hide(true));
    }
    top
}

/// The first client flag given on the command line (before or after the command), as
/// `--name`: the binary refuses them on commands that are not client commands.
pub fn client_flag_given(matches: &clap::ArgMatches) -> Option<String> {
    conn_ids().into_iter().find_map(|id| {
        let given = matches.try_contains_id(id.as_str()).unwrap_or(false)
            && matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine);
        given.then(|| format!("--{}", id.as_str().replace('_', "-")))
    })
}

/// The transport flag's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportArg {
    /// Nacos 2.x gRPC.
    Grpc,
    /// Nacos 1.x HTTP with long polling, for servers without gRPC.
    Http,
}

// A config's name: its data id and group.
#[derive(Debug, Clone, clap::Args)]
pub struct KeyArgs {
    /// The config's data id.
    pub data_id: String,
    /// Its group.
    #[arg(long, short = 'g', default_value = DEFAULT_GROUP)]
    pub group: String,
}

impl KeyArgs {
    pub(crate) fn key(&self, client: &Client) -> nacelle_client::Key {
        client.key((self.group.as_str(), self.data_id.as_str()))
    }
}

// The client commands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Print a config's content.
    #[command(
        after_help = "Examples:\n  nacelle get app.yaml\n  nacelle get app.yaml -g SHOP -n prod -o json\n  nacelle get app.yaml --tag canary"
    )]
    Get(configs::GetArgs),
    /// Publish a config from a file or stdin (type from the extension).
    #[command(
        after_help = "Examples:\n  nacelle put app.yaml ./app.yaml\n  echo 'a=1' | nacelle put app.properties\n  nacelle put app.yaml ./app.yaml --cas 0cc175b9c0f1b6a831c399e269772661\n  nacelle put app.yaml ./beta.yaml --beta-ips 10.0.0.7,10.0.0.8"
    )]
    Put(configs::PutArgs),
    /// Remove a config (or one tag variant).
    #[command(after_help = "Examples:\n  nacelle rm app.yaml\n  nacelle rm app.yaml --tag canary")]
    Rm(configs::RmArgs),
    /// List configs whose data id (and group) match a pattern (`*` is a wildcard).
    #[command(
        visible_alias = "search",
        after_help = "Examples:\n  nacelle ls\n  nacelle ls 'app*' -g SHOP\n  nacelle search '*.yaml' -o json"
    )]
    Ls(configs::LsArgs),
    /// Print every change of configs as it happens; optionally run a command on each.
    #[command(
        after_help = "Examples:\n  nacelle watch app.yaml\n  nacelle watch app.yaml db.yaml -o json\n  nacelle watch app.yaml --exec 'cat > /etc/app.yaml && systemctl reload app'\n\nThe command runs with the new content on stdin and NACELLE_EVENT, NACELLE_DATA_ID,\nNACELLE_GROUP, NACELLE_NAMESPACE, NACELLE_MD5 in its environment."
    )]
    Watch(configs::WatchArgs),
    /// List a config's history (newest first).
    #[command(
        after_help = "Examples:\n  nacelle history app.yaml\n  nacelle history app.yaml -o json"
    )]
    History(versions::HistoryArgs),
    /// Unified diff between two versions, a version and now, or a local file and the server.
    #[command(
        after_help = "Examples:\n  nacelle diff app.yaml --file ./app.yaml     # local file vs the server\n  nacelle diff app.yaml --from 41             # version 41 vs now\n  nacelle diff app.yaml --from 41 --to 42"
    )]
    Diff(versions::DiffArgs),
    /// Publish a history version again (asks first unless --yes).
    #[command(
        after_help = "Examples:\n  nacelle rollback app.yaml --to 41\n  nacelle rollback app.yaml --to 41 --yes"
    )]
    Rollback(versions::RollbackArgs),
    /// Namespaces: list, create, delete.
    #[command(
        after_help = "Examples:\n  nacelle ns list\n  nacelle ns create dev --name Development\n  nacelle ns delete dev --yes"
    )]
    Ns(admin::NsArgs),
    /// Export a namespace's configs as a Nacos zip.
    #[command(
        after_help = "Examples:\n  nacelle export --file prod.zip -n prod\n  nacelle export -g SHOP --file shop.zip"
    )]
    Export(admin::ExportArgs),
    /// Import a Nacos zip into a namespace.
    #[command(
        after_help = "Examples:\n  nacelle import prod.zip -n staging\n  nacelle import prod.zip -n staging --policy overwrite"
    )]
    Import(admin::ImportArgs),
    /// Gray releases of a key: list, create (by IPs, labels or app), promote, stop.
    #[command(
        after_help = "Examples:\n  nacelle gray ls app.yaml\n  nacelle gray create app.yaml ./canary.yaml --ips 10.0.0.7\n  nacelle gray create app.yaml ./canary.yaml --app shop --name shop-canary --priority 10\n  nacelle gray promote app.yaml --name shop-canary\n  nacelle gray stop app.yaml"
    )]
    Gray(gray::GrayArgs),
    /// Change requests: create, ls, show, diff, open, approve, reject, comment, rebase,
    /// close, publish, schedule.
    #[command(
        after_help = "Examples:\n  nacelle change create -t 'raise limits' --put limits.yaml=./limits.yaml\n  nacelle change ls --state open\n  nacelle change diff 12\n  nacelle change approve 12 -m 'looks right'\n  nacelle change publish 12"
    )]
    Change(changes::ChangeArgs),
    /// Review policies (administrators set them): ls, set, rm.
    #[command(
        after_help = "Examples:\n  nacelle policy ls\n  nacelle policy set -n prod --approvals 2\n  nacelle policy rm -n prod"
    )]
    Policy(changes::PolicyArgs),
    /// Staged rollouts: start, ls, status, pause, resume, advance, abort.
    #[command(
        after_help = "Examples:\n  nacelle rollout start app.yaml ./app.yaml --steps 5,25,50,100 --bake 10m --guard-prom 'errors_total > 0'\n  nacelle rollout ls --active\n  nacelle rollout status 12\n  nacelle rollout advance 12\n  nacelle rollout abort 12 -m 'wrong file'"
    )]
    Rollout(rollouts::RolloutArgs),
    /// Users (administrators): list, create, passwd, rm.
    #[command(
        after_help = "Examples:\n  nacelle user ls\n  nacelle user create dev                      # asks for the password\n  printf '%s\\n' \"$PW\" | nacelle user passwd dev --password-stdin\n  nacelle user rm dev"
    )]
    User(users::UserArgs),
    /// Roles of users (administrators): list, add, rm.
    #[command(
        after_help = "Examples:\n  nacelle role ls\n  nacelle role add developers dev\n  nacelle role rm developers dev"
    )]
    Role(users::RoleArgs),
    /// Permissions of roles (administrators): list, add, rm.
    #[command(
        after_help = "Examples:\n  nacelle perm ls\n  nacelle perm add developers 'dev:*:*' rw\n  nacelle perm rm developers 'dev:*:*' rw"
    )]
    Perm(users::PermArgs),
    /// JSON Schemas of config keys: set (administrators), get, ls, rm, check.
    #[command(
        after_help = "Examples:\n  nacelle schema set -g PAYMENTS -d '*.yaml' -f limits.schema.json --desc 'payment limits'\n  nacelle schema ls\n  nacelle schema get -g PAYMENTS -d '*.yaml' -o json\n  nacelle schema check limits.yaml ./limits.yaml -g PAYMENTS\n  nacelle schema rm -g PAYMENTS -d '*.yaml'"
    )]
    Schema(schemas::SchemaArgs),
    /// The audit trail (administrators): list entries, verify the hash chain.
    #[command(
        after_help = "Examples:\n  nacelle audit ls --since 1h --user alice\n  nacelle audit ls --key public/DEFAULT_GROUP/app.yaml --action publish -o json\n  nacelle audit verify"
    )]
    Audit(audit::AuditArgs),
    /// Who runs what: the clients listening to a config on every node, what each holds
    /// (formal, a gray, unknown) and since when.
    #[command(
        after_help = "Examples:\n  nacelle clients app.yaml\n  nacelle clients app.yaml -g SHOP -n prod --summary\n  nacelle clients app.yaml -o json"
    )]
    Clients(clients::ClientsArgs),
    /// Webhooks (administrators): add, ls, rm, deliveries, redeliver.
    #[command(
        after_help = "Examples:\n  nacelle webhook add https://ci.example.com/hook -n prod -g PAYMENTS -d '*.yaml' --secret-stdin\n  nacelle webhook add http://10.0.0.5:9000/h --events publish,remove --secret \"$SECRET\"\n  nacelle webhook ls\n  nacelle webhook deliveries 3\n  nacelle webhook redeliver 41\n  nacelle webhook rm 3"
    )]
    Webhook(webhooks::WebhookArgs),
    /// Log in and save the server, user and token as a profile.
    #[command(
        after_help = "Examples:\n  nacelle login -s 10.0.0.1:8848 --username nacos   # asks for the password (no echo)\n  nacelle login -s prod:8848 --username ops --password \"$PW\" --profile prod"
    )]
    Login(login::LoginArgs),
    /// Saved profiles: list, use.
    #[command(after_help = "Examples:\n  nacelle profile list\n  nacelle profile use prod")]
    Profile(login::ProfileArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  nacelle completion bash > /etc/bash_completion.d/nacelle\n  nacelle completion zsh > \"${fpath[1]}/_nacelle\""
    )]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Runs a client command and prints its error; the process exit code. `top` builds the
/// binary's whole command (for `completion`).
pub async fn run(cmd: Command, top: impl FnOnce() -> clap::Command) -> u8 {
    match dispatch(cmd, top).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

async fn dispatch(cmd: Command, top: impl FnOnce() -> clap::Command) -> Result<()> {
    match cmd {
        Command::Get(a) => configs::get(a).await,
        Command::Put(a) => configs::put(a).await,
        Command::Rm(a) => configs::rm(a).await,
        Command::Ls(a) => configs::ls(a).await,
        Command::Watch(a) => configs::watch(a).await,
        Command::History(a) => versions::history(a).await,
        Command::Diff(a) => versions::diff(a).await,
        Command::Rollback(a) => versions::rollback(a).await,
        Command::Ns(a) => admin::ns(a).await,
        Command::Export(a) => admin::export(a).await,
        Command::Import(a) => admin::import(a).await,
        Command::Gray(a) => gray::gray(a).await,
        Command::Change(a) => changes::change(a).await,
        Command::Policy(a) => changes::policy(a).await,
        Command::Rollout(a) => rollouts::rollout(a).await,
        Command::User(a) => users::user(a).await,
        Command::Role(a) => users::role(a).await,
        Command::Perm(a) => users::perm(a).await,
        Command::Schema(a) => schemas::schema(a).await,
        Command::Audit(a) => audit::audit(a).await,
        Command::Clients(a) => clients::clients(a).await,
        Command::Webhook(a) => webhooks::webhook(a).await,
        Command::Login(a) => login::login(a).await,
        Command::Profile(a) => login::profile(a),
        Command::Completion { shell } => {
            let mut cmd = top();
            let name = cmd.get_name().to_string();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, name, &mut script);
            use std::io::Write;
            match std::io::stdout().write_all(&script) {
                // Piped into `head`: the reader has what it wanted.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.map_err(CliError::io("writing stdout")),
            }
        }
    }
}

/// The default server when neither a flag nor a profile names one.
pub const DEFAULT_SERVER: &str = "127.0.0.1:8848";

/// A client for these flags: flags (and their variables) first, then the profile.
pub(crate) async fn connect(conn: &Conn) -> Result<Client> {
    let profiles = profile::Profiles::load()?;
    let picked = profiles.pick(conn.profile.as_deref())?.map(|(_, p)| p);
    let servers = if !conn.server.is_empty() {
        conn.server.clone()
    } else {
        picked
            .as_ref()
            .map(|p| p.servers.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| vec![DEFAULT_SERVER.to_string()])
    };
    let namespace = conn
        .namespace
        .clone()
        .or_else(|| picked.as_ref().map(|p| p.namespace.clone()))
        .unwrap_or_default();
    let wait = Duration::from_millis(conn.timeout_ms);
    let mut b = Client::builder()
        .server_addrs(servers)
        .namespace(namespace)
        .app_name("nacelle-cli")
        .wait_for_server(wait)
        .connect_timeout(wait)
        .transport(match conn.transport {
            TransportArg::Grpc => nacelle_client::Transport::Grpc,
            TransportArg::Http => nacelle_client::Transport::HttpLongPolling,
        });
    match (&conn.username, &conn.password) {
        (Some(u), Some(p)) => b = b.credentials(u, p),
        (Some(_), None) => {
            return Err(CliError::Usage(
                "--username needs --password (or NACELLE_PASSWORD); `nacelle login` asks for it"
                    .into(),
            ))
        }
        _ => {
            if let Some(p) = &picked {
                if let Some(token) = &p.access_token {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs())
                        .unwrap_or(0);
                    if p.token_expires_at.is_some_and(|t| t <= now) {
                        eprintln!(
                            "warning: the profile's token has expired; run `nacelle login` again"
                        );
                    } else {
                        b = b.access_token(token);
                    }
                }
            }
        }
    }
    Ok(b.build().await?)
}

#[cfg(test)]
mod tests {
    use clap::Subcommand;

    /// clap's own checks of every subcommand (unique argument names, valid groups), which
    /// it otherwise runs only when a command is parsed in a debug build.
    #[test]
    fn every_command_is_well_formed() {
        super::Command::augment_subcommands(clap::Command::new("nacelle")).debug_assert();
        super::global_flags(super::Command::augment_subcommands(clap::Command::new(
            "nacelle",
        )))
        .debug_assert();
    }

    /// A client command as the binary parses it, with the client flags on its top command.
    fn parse(args: &[&str]) -> Result<super::Command, clap::Error> {
        use clap::FromArgMatches;
        let top = super::global_flags(super::Command::augment_subcommands(
            clap::Command::new("nacelle").subcommand_required(true),
        ));
        let matches =
            top.try_get_matches_from(std::iter::once("nacelle").chain(args.iter().copied()))?;
        super::Command::from_arg_matches(&matches)
    }

    fn conn(cmd: &super::Command) -> Option<&super::Conn> {
        use super::Command as C;
        match cmd {
            C::Ls(a) => Some(&a.conn),
            C::Get(a) => Some(&a.conn),
            C::Ns(a) => Some(&a.conn),
            _ => None,
        }
    }

    #[test]
    fn global_flags_before_the_command() -> Result<(), clap::Error> {
        let cmd = parse(&["-n", "dev", "ls"])?;
        let c = conn(&cmd).map(|c| c.namespace.clone());
        assert_eq!(c, Some(Some("dev".to_string())));

        let cmd = parse(&[
            "-s",
            "h1:1,h2:2",
            "-o",
            "json",
            "--profile",
            "prod",
            "--timeout-ms",
            "10",
            "--transport",
            "http",
            "--username",
            "u",
            "--password",
            "p",
            "get",
            "app.yaml",
        ])?;
        let c = conn(&cmd).ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue))?;
        assert_eq!(c.server, ["h1:1", "h2:2"]);
        assert_eq!(c.output, super::Output::Json);
        assert_eq!(c.profile.as_deref(), Some("prod"));
        assert_eq!(c.timeout_ms, 10);
        assert_eq!(c.transport, super::TransportArg::Http);
        assert_eq!(c.username.as_deref(), Some("u"));
        assert_eq!(c.password.as_deref(), Some("p"));
        assert!(
            !format!("{c:?}").contains("\"p\""),
            "Debug shows no password: {c:?}"
        );

        // Nested commands too; after the command is still fine, and wins.
        let cmd = parse(&["-n", "dev", "ns", "list"])?;
        assert_eq!(
            conn(&cmd).and_then(|c| c.namespace.clone()).as_deref(),
            Some("dev")
        );
        let cmd = parse(&["-n", "dev", "ls", "-n", "prod"])?;
        assert_eq!(
            conn(&cmd).and_then(|c| c.namespace.clone()).as_deref(),
            Some("prod")
        );
        let cmd = parse(&["-o", "json", "ls", "-o", "table"])?;
        assert_eq!(conn(&cmd).map(|c| c.output), Some(super::Output::Table));
        let cmd = parse(&["ls"])?;
        assert_eq!(conn(&cmd).map(|c| c.output), Some(super::Output::Table));
        Ok(())
    }

    #[test]
    fn switches_take_a_value_after_an_equals_sign() -> Result<(), clap::Error> {
        for (args, yes) in [
            (&["rollback", "app.yaml", "--to", "4"][..], false),
            (&["rollback", "app.yaml", "--to", "4", "--yes"][..], true),
            (&["rollback", "--yes", "app.yaml", "--to", "4"][..], true),
            (&["rollback", "-y", "app.yaml", "--to", "4"][..], true),
            (
                &["rollback", "app.yaml", "--yes=true", "--to", "4"][..],
                true,
            ),
            (
                &["rollback", "app.yaml", "--to", "4", "--yes=false"][..],
                false,
            ),
            (&["rollback", "app.yaml", "--to", "4", "-y=no"][..], false),
        ] {
            let super::Command::Rollback(a) = parse(args)? else {
                return Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand));
            };
            assert_eq!(a.yes, yes, "{args:?}");
        }
        assert!(parse(&["rollback", "app.yaml", "--to", "4", "--yes=maybe"]).is_err());
        Ok(())
    }
}
