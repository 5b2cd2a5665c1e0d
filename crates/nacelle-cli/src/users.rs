//! `user ls|create|passwd|rm`, `role ls|add|rm`, `perm ls|add|rm`: the server's users,
//! roles and permissions (`docs/security.md`), for administrators. A password is read from
//! the terminal without echo, or from stdin with `--password-stdin` — never taken as a
//! plain argument (it would sit in the shell history and the process list).

use std::io::{BufRead, IsTerminal};

use serde_json::json;

use crate::error::{CliError, Result};
use crate::output::{self, Output};
use crate::{connect, Conn};

// Page flags of a listing.
#[derive(Debug, Clone, clap::Args)]
pub struct PageArgs {
    /// Page number (from 1).
    #[arg(long, default_value_t = 1)]
    page: u32,
    /// Page size (at most 500).
    #[arg(long, default_value_t = 100)]
    size: u32,
}

// Where a new password comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct PasswordArgs {
    /// Read the password from the first line of stdin (for scripts) instead of asking on
    /// the terminal.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    password_stdin: bool,
}

// `nacelle user`.
#[derive(Debug, clap::Args)]
pub struct UserArgs {
    #[command(subcommand)]
    cmd: UserCommand,
}

// The user commands.
#[derive(Debug, clap::Subcommand)]
pub enum UserCommand {
    /// List users.
    #[command(
        visible_alias = "list",
        after_help = "Examples:\n  nacelle user ls\n  nacelle user ls -o json"
    )]
    Ls {
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Create a user (asks for its password twice, or reads it with --password-stdin).
    #[command(
        after_help = "Examples:\n  nacelle user create dev\n  printf '%s\\n' \"$PW\" | nacelle user create dev --password-stdin"
    )]
    Create {
        /// The user name.
        #[arg(value_name = "USERNAME")]
        name: String,
        #[command(flatten)]
        password: PasswordArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Change a user's password (administrators: anyone's; users: their own).
    #[command(
        after_help = "Examples:\n  nacelle user passwd dev\n  printf '%s\\n' \"$PW\" | nacelle user passwd dev --password-stdin"
    )]
    Passwd {
        /// The user name.
        #[arg(value_name = "USERNAME")]
        name: String,
        #[command(flatten)]
        password: PasswordArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a user.
    #[command(
        visible_alias = "delete",
        after_help = "Examples:\n  nacelle user rm dev"
    )]
    Rm {
        /// The user name.
        #[arg(value_name = "USERNAME")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
}

// `nacelle role`.
#[derive(Debug, clap::Args)]
pub struct RoleArgs {
    #[command(subcommand)]
    cmd: RoleCommand,
}

// The role commands.
#[derive(Debug, clap::Subcommand)]
pub enum RoleCommand {
    /// List role grants (optionally of one user).
    #[command(
        visible_alias = "list",
        after_help = "Examples:\n  nacelle role ls\n  nacelle role ls --user dev -o json"
    )]
    Ls {
        /// Only this user's roles.
        #[arg(long)]
        user: Option<String>,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Grant a role to a user (the role exists once granted).
    #[command(
        after_help = "Examples:\n  nacelle role add developers dev\n  nacelle role add ROLE_ADMIN ops"
    )]
    Add {
        /// The role.
        role: String,
        /// The user.
        #[arg(value_name = "USERNAME")]
        user: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Take a role from a user, or (without a user) from everyone.
    #[command(
        visible_alias = "delete",
        after_help = "Examples:\n  nacelle role rm developers dev\n  nacelle role rm developers        # from every user"
    )]
    Rm {
        /// The role.
        role: String,
        /// The user (default: every user).
        #[arg(value_name = "USERNAME")]
        user: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
}

// `nacelle perm`.
#[derive(Debug, clap::Args)]
pub struct PermArgs {
    #[command(subcommand)]
    cmd: PermCommand,
}

// A permission: role, resource, action.
#[derive(Debug, Clone, clap::Args)]
pub struct PermSpec {
    /// The role.
    role: String,
    /// The resource pattern `<namespace>:<group>:config/<dataId>` (`*` matches anything;
    /// the public namespace is the empty id: `:*:*`).
    resource: String,
    /// The action: r, w or rw; `a` (alone or after them: ra, wa, rwa) approves change
    /// requests.
    #[arg(value_parser = ["r", "w", "rw", "a", "ra", "wa", "rwa"])]
    action: String,
}

// The permission commands.
#[derive(Debug, clap::Subcommand)]
pub enum PermCommand {
    /// List permissions (optionally of one role).
    #[command(
        visible_alias = "list",
        after_help = "Examples:\n  nacelle perm ls\n  nacelle perm ls --role developers -o json"
    )]
    Ls {
        /// Only this role's permissions.
        #[arg(long)]
        role: Option<String>,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Give a role an action on a resource pattern.
    #[command(
        after_help = "Examples:\n  nacelle perm add developers 'dev:*:*' rw          # all of namespace dev\n  nacelle perm add readers ':DEFAULT_GROUP:config/app.yaml' r   # one key of public"
    )]
    Add {
        #[command(flatten)]
        perm: PermSpec,
        #[command(flatten)]
        conn: Conn,
    },
    /// Take a permission away.
    #[command(
        visible_alias = "delete",
        after_help = "Examples:\n  nacelle perm rm developers 'dev:*:*' rw"
    )]
    Rm {
        #[command(flatten)]
        perm: PermSpec,
        #[command(flatten)]
        conn: Conn,
    },
}

/// Reads a new password: the first line of stdin with `--password-stdin`, else twice from
/// the terminal without echo.
fn read_password(args: &PasswordArgs, username: &str) -> Result<String> {
    let password = if args.password_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(CliError::io("reading the password from stdin"))?;
        line.trim_end_matches(['\r', '\n']).to_string()
    } else {
        if !std::io::stdin().is_terminal() {
            return Err(CliError::Usage(
                "no terminal to ask for the password on: use --password-stdin".into(),
            ));
        }
        let first = rpassword::prompt_password(format!("new password for {username}: "))
            .map_err(CliError::io("reading the password"))?;
        let again =
            rpassword::prompt_password("again: ").map_err(CliError::io("reading the password"))?;
        if first != again {
            return Err(CliError::Usage("the passwords differ".into()));
        }
        first
    };
    if password.is_empty() {
        return Err(CliError::Usage("the password is empty".into()));
    }
    Ok(password)
}

/// Prints a write's outcome.
fn done(conn: &Conn, v: serde_json::Value, said: String) {
    match conn.output {
        Output::Json => output::json(&v),
        Output::Table => println!("{said}"),
    }
}

pub(crate) async fn user(a: UserArgs) -> Result<()> {
    match a.cmd {
        UserCommand::Ls { page, conn } => {
            let client = connect(&conn).await?;
            let list = client.admin().users(page.page, page.size).await?;
            output::page(
                conn.output,
                &list,
                &["USERNAME"],
                |u| json!({"username": u.username}),
                |u| vec![u.username.clone()],
            );
            output::page_footer(conn.output, &list, "users");
        }
        UserCommand::Create {
            name: username,
            password,
            conn,
        } => {
            let pw = read_password(&password, &username)?;
            let client = connect(&conn).await?;
            client.admin().create_user(&username, &pw).await?;
            done(
                &conn,
                json!({"created": true, "username": username}),
                format!("created user {username}"),
            );
        }
        UserCommand::Passwd {
            name: username,
            password,
            conn,
        } => {
            let pw = read_password(&password, &username)?;
            let client = connect(&conn).await?;
            client.admin().change_password(&username, &pw).await?;
            done(
                &conn,
                json!({"updated": true, "username": username}),
                format!("changed the password of {username}"),
            );
        }
        UserCommand::Rm {
            name: username,
            conn,
        } => {
            let client = connect(&conn).await?;
            client.admin().delete_user(&username).await?;
            done(
                &conn,
                json!({"deleted": true, "username": username}),
                format!("deleted user {username}"),
            );
        }
    }
    Ok(())
}

pub(crate) async fn role(a: RoleArgs) -> Result<()> {
    match a.cmd {
        RoleCommand::Ls { user, page, conn } => {
            let client = connect(&conn).await?;
            let list = client
                .admin()
                .roles(user.as_deref(), page.page, page.size)
                .await?;
            output::page(
                conn.output,
                &list,
                &["ROLE", "USERNAME"],
                |r| json!({"role": r.role, "username": r.username}),
                |r| vec![r.role.clone(), r.username.clone()],
            );
            output::page_footer(conn.output, &list, "grants");
        }
        RoleCommand::Add {
            role,
            user: username,
            conn,
        } => {
            let client = connect(&conn).await?;
            client.admin().add_role(&role, &username).await?;
            done(
                &conn,
                json!({"added": true, "role": role, "username": username}),
                format!("granted {role} to {username}"),
            );
        }
        RoleCommand::Rm {
            role,
            user: username,
            conn,
        } => {
            let client = connect(&conn).await?;
            client
                .admin()
                .delete_role(&role, username.as_deref())
                .await?;
            let said = match &username {
                Some(u) => format!("took {role} from {u}"),
                None => format!("deleted role {role}"),
            };
            done(
                &conn,
                json!({"deleted": true, "role": role, "username": username}),
                said,
            );
        }
    }
    Ok(())
}

pub(crate) async fn perm(a: PermArgs) -> Result<()> {
    match a.cmd {
        PermCommand::Ls { role, page, conn } => {
            let client = connect(&conn).await?;
            let list = client
                .admin()
                .permissions(role.as_deref(), page.page, page.size)
                .await?;
            output::page(
                conn.output,
                &list,
                &["ROLE", "RESOURCE", "ACTION"],
                |p| json!({"role": p.role, "resource": p.resource, "action": p.action}),
                |p| vec![p.role.clone(), p.resource.clone(), p.action.clone()],
            );
            output::page_footer(conn.output, &list, "permissions");
        }
        PermCommand::Add { perm, conn } => {
            let client = connect(&conn).await?;
            client
                .admin()
                .add_permission(&perm.role, &perm.resource, &perm.action)
                .await?;
            done(
                &conn,
                json!({"added": true, "role": perm.role, "resource": perm.resource,
                       "action": perm.action}),
                format!("gave {} `{}` on {}", perm.role, perm.action, perm.resource),
            );
        }
        PermCommand::Rm { perm, conn } => {
            let client = connect(&conn).await?;
            client
                .admin()
                .delete_permission(&perm.role, &perm.resource, &perm.action)
                .await?;
            done(
                &conn,
                json!({"deleted": true, "role": perm.role, "resource": perm.resource,
                       "action": perm.action}),
                format!(
                    "took `{}` on {} from {}",
                    perm.action, perm.resource, perm.role
                ),
            );
        }
    }
    Ok(())
}
