//! The client commands of the real `nacelle` binary (nacelle-cli) against a real server
//! (the binary too), as a new user would run them: put/get, watch (with --exec), history,
//! diff, rollback, namespaces, export/import, JSON output parsed, profiles, completions,
//! and the exit codes and messages of a missing key, an unreachable server and a failed
//! login (none printing a password or a token: tests at the end); client flags before the
//! command (`nacelle -n dev ls`) and `serve`'s switches (`--auth-anonymous-read[=bool]`);
//! with authentication on, gray releases (by IPs and by app, listed, promoted,
//! stopped) and users, roles and permissions; the import's progress bar on a terminal.
//! Each test has its own `XDG_CONFIG_HOME`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nacelle_testkit::server::BinaryServer;
use nacelle_testkit::{free_port, TestResult};
use serde_json::Value;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");

struct Env {
    server: BinaryServer,
    addr: String,
    config: tempfile::TempDir,
    work: tempfile::TempDir,
    _data: tempfile::TempDir,
}

fn start() -> TestResult<Env> {
    start_with(&[])
}

fn start_with(extra: &[&str]) -> TestResult<Env> {
    let data = tempfile::tempdir()?;
    let grpc = free_port()?.to_string();
    let mut args = vec!["--grpc-port", grpc.as_str()];
    args.extend_from_slice(extra);
    let server = BinaryServer::spawn(NACELLE, data.path(), &args)?;
    let addr = format!("127.0.0.1:{}/{grpc}", server.addr.port());
    Ok(Env {
        server,
        addr,
        config: tempfile::tempdir()?,
        work: tempfile::tempdir()?,
        _data: data,
    })
}

impl Env {
    /// `nacelle ARGS` with this server, its own config dir, run in the work dir.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(NACELLE);
        for (k, _) in std::env::vars() {
            if k.starts_with("NACELLE_") {
                c.env_remove(k);
            }
        }
        c.args(args)
            .env("XDG_CONFIG_HOME", self.config.path())
            .env("NACELLE_SERVER", &self.addr)
            .current_dir(self.work.path());
        c
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> TestResult<Output> {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.unwrap_or("").as_bytes())?;
        }
        Ok(child.wait_with_output()?)
    }

    /// Runs and requires success; stdout.
    fn ok(&self, args: &[&str], stdin: Option<&str>) -> TestResult<String> {
        let out = self.run(args, stdin)?;
        if !out.status.success() {
            return Err(format!(
                "nacelle {args:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(String::from_utf8(out.stdout)?)
    }

    fn json(&self, args: &[&str]) -> TestResult<Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        Ok(serde_json::from_str(&self.ok(&all, None)?)?)
    }

    fn file(&self, name: &str, content: &str) -> TestResult<String> {
        let p = self.work.path().join(name);
        std::fs::write(&p, content)?;
        Ok(p.display().to_string())
    }
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn put_and_get_from_a_file_and_from_stdin() -> TestResult {
    let env = start()?;
    let file = env.file("app.yaml", "a: 1\n")?;
    let said = env.ok(&["put", "app.yaml", &file], None)?;
    assert!(
        said.contains("published public/DEFAULT_GROUP/app.yaml") && said.contains("yaml"),
        "{said}"
    );
    assert_eq!(env.ok(&["get", "app.yaml"], None)?, "a: 1\n");
    let v = env.json(&["get", "app.yaml"])?;
    assert_eq!(v["type"], "yaml");
    assert_eq!(v["content"], "a: 1\n");
    assert_eq!(v["md5"], nacelle_testkit::md5("a: 1\n"));

    // stdin, another group and namespace-less type from the data id's extension.
    env.ok(
        &["put", "db.properties", "-g", "SHOP"],
        Some("url=jdbc:x\n"),
    )?;
    let v = env.json(&["get", "db.properties", "-g", "SHOP"])?;
    assert_eq!(
        (v["type"].as_str(), v["content"].as_str()),
        (Some("properties"), Some("url=jdbc:x\n"))
    );

    // Compare-and-set with a stale md5 is rejected (exit 6), the content kept.
    let out = env.run(
        &["put", "app.yaml", "--cas", "0123", "-t", "yaml"],
        Some("a: 2\n"),
    )?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("compare-and-set"), "{}", stderr(&out));

    // The same over the 1.x HTTP API.
    env.ok(&["put", "h.txt", "--transport", "http"], Some("over http"))?;
    assert_eq!(
        env.ok(&["get", "h.txt", "--transport", "http"], None)?,
        "over http"
    );
    env.ok(&["rm", "h.txt", "--transport", "http"], None)?;

    let ls = env.json(&["ls"])?;
    assert_eq!(ls["totalCount"], 2);
    let ls = env.ok(&["search", "db*", "-g", "SHOP"], None)?;
    assert!(
        ls.starts_with("DATA ID") && ls.contains("db.properties"),
        "{ls}"
    );

    env.ok(&["rm", "app.yaml"], None)?;
    let out = env.run(&["get", "app.yaml"], None)?;
    assert_eq!(code(&out), Some(3));
    assert_eq!(
        stderr(&out).trim(),
        "error: config public/DEFAULT_GROUP/app.yaml not found"
    );
    Ok(())
}

#[test]
fn an_unreachable_server_and_a_failed_login_say_so() -> TestResult {
    let env = start()?;
    let port = free_port()?;
    let out = env.run(
        &[
            "get",
            "x",
            "-s",
            &format!("127.0.0.1:{port}/{port}"),
            "--timeout-ms",
            "300",
        ],
        None,
    )?;
    assert_eq!(code(&out), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: no server reachable: 127.0.0.1"),
        "{}",
        stderr(&out)
    );

    let out = env.run(
        &["login", "--username", "nacos", "--password", "wrong"],
        None,
    )?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("login failed"), "{}", stderr(&out));

    // Bad usage is clap's exit code 2.
    let out = env.run(&["get"], None)?;
    assert_eq!(code(&out), Some(2));
    Ok(())
}

#[test]
fn login_saves_a_profile_whose_token_later_commands_use() -> TestResult {
    let env = start_logged_in()?;
    let file = env.config.path().join("nacelle").join("profiles.toml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file)?.permissions().mode() & 0o777,
            0o600
        );
    }
    let saved = std::fs::read_to_string(&file)?;
    assert!(
        saved.contains("current = \"default\"") && saved.contains("access_token"),
        "{saved}"
    );

    // Later commands send the saved token: gRPC and HTTP alike.
    env.ok(&["put", "secured.txt"], Some("s"))?;
    assert_eq!(env.ok(&["get", "secured.txt"], None)?, "s");
    assert!(env.ok(&["ns", "list"], None)?.contains("public"));
    assert_eq!(env.json(&["profile", "list"])?[0]["username"], "nacos");

    // A wrong password: exit 5 and the server's reason.
    let out = env.run(
        &["login", "--username", "nacos", "--password", "wrong"],
        None,
    )?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: login failed: nacos at"),
        "{}",
        stderr(&out)
    );
    // No profile, no credentials: refused (exit 5); credentials as flags work.
    let elsewhere = tempfile::tempdir()?;
    let out = env
        .command(&["get", "secured.txt"])
        .env("XDG_CONFIG_HOME", elsewhere.path())
        .output()?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: forbidden"),
        "{}",
        stderr(&out)
    );
    let out = env
        .command(&[
            "get",
            "secured.txt",
            "--username",
            "nacos",
            "--password",
            ADMIN_PASSWORD,
        ])
        .env("XDG_CONFIG_HOME", elsewhere.path())
        .output()?;
    assert!(out.status.success(), "{}", stderr(&out));
    Ok(())
}

#[test]
fn watch_prints_every_change_and_runs_its_command() -> TestResult {
    let env = start()?;
    env.ok(&["put", "w.txt"], Some("one"))?;
    let marker = env.work.path().join("exec.log");
    let exec = format!(
        "echo \"$NACELLE_EVENT $NACELLE_DATA_ID $(cat)\" >> {}",
        marker.display()
    );
    let mut child = env
        .command(&[
            "watch",
            "w.txt",
            "later.txt",
            "--count",
            "3",
            "-o",
            "json",
            "--exec",
            &exec,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Wait until it listens.
    let mut err = BufReader::new(child.stderr.take().ok_or("stderr")?);
    let mut line = String::new();
    err.read_line(&mut line)?;
    assert!(
        line.starts_with("watching public/DEFAULT_GROUP/w.txt"),
        "{line}"
    );

    env.ok(&["put", "w.txt"], Some("two"))?;
    env.ok(&["put", "later.txt"], Some("first value"))?;
    env.ok(&["rm", "w.txt"], None)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            child.kill()?;
            return Err("watch did not end after 3 changes".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output()?;
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8(out.stdout)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let seen: Vec<(&str, &str, Option<&str>)> = events
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or(""),
                e["dataId"].as_str().unwrap_or(""),
                e["content"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("changed", "w.txt", Some("two")),
            ("changed", "later.txt", Some("first value")),
            ("removed", "w.txt", None),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(&marker)?,
        "changed w.txt two\nchanged later.txt first value\nremoved w.txt \n"
    );
    Ok(())
}

#[test]
fn history_diff_and_rollback() -> TestResult {
    let env = start()?;
    env.ok(&["put", "h.yaml"], Some("v: 1\n"))?;
    env.ok(&["put", "h.yaml"], Some("v: 2\n"))?;
    let h = env.json(&["history", "h.yaml"])?;
    let items = h["items"].as_array().ok_or("items")?;
    assert_eq!(items.len(), 2);
    let first = items[1]["id"].as_str().ok_or("id")?.to_string();
    assert_eq!(items[1]["opType"], "I");
    let table = env.ok(&["history", "h.yaml"], None)?;
    assert!(
        table.starts_with("VERSION") && table.contains("insert"),
        "{table}"
    );

    // The first version against now.
    let d = env.ok(&["diff", "h.yaml", "--from", &first], None)?;
    assert!(d.contains("-v: 1\n+v: 2\n"), "{d}");
    // A local file against the server.
    let local = env.file("h.yaml", "v: 3\n")?;
    let d = env.json(&["diff", "h.yaml", "--file", &local])?;
    assert_eq!(d["identical"], false);
    assert!(d["diff"].as_str().ok_or("diff")?.contains("-v: 2\n+v: 3\n"));
    let out = env.run(&["diff", "h.yaml"], None)?;
    assert_eq!(code(&out), Some(2));

    // Rollback asks first: without a terminal and without --yes nothing changes.
    let out = env.run(&["rollback", "h.yaml", "--to", &first], None)?;
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"));
    assert_eq!(env.ok(&["get", "h.yaml"], None)?, "v: 2\n");
    env.ok(&["rollback", "h.yaml", "--to", &first, "--yes"], None)?;
    assert_eq!(env.ok(&["get", "h.yaml"], None)?, "v: 1\n");
    assert_eq!(env.json(&["get", "h.yaml"])?["type"], "yaml");
    let out = env.run(&["rollback", "h.yaml", "--to", "999999", "--yes"], None)?;
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    Ok(())
}

#[test]
fn namespaces_export_and_import() -> TestResult {
    let env = start()?;
    env.ok(&["put", "a.yaml"], Some("a: 1\n"))?;
    env.ok(&["put", "b.json", "-g", "G"], Some("{\"b\": 2}"))?;
    env.ok(&["ns", "create", "staging", "--name", "Staging"], None)?;
    let list = env.json(&["ns", "list"])?;
    assert!(list
        .as_array()
        .ok_or("list")?
        .iter()
        .any(|n| n["id"] == "staging" && n["name"] == "Staging"));

    let zip = env.work.path().join("public.zip");
    let zip_s = zip.display().to_string();
    env.ok(&["export", "--file", &zip_s], None)?;
    assert!(std::fs::read(&zip)?.starts_with(b"PK"));
    let r = env.json(&["import", &zip_s, "-n", "staging"])?;
    assert_eq!(r["succCount"], 2);
    assert_eq!(
        env.ok(&["get", "b.json", "-g", "G", "-n", "staging"], None)?,
        "{\"b\": 2}"
    );
    // Again with ABORT: the first key exists, so nothing is written, and the CLI says
    // where it stopped (as Nacos: the first existing key, the rest not imported).
    let out = env.run(&["import", &zip_s, "-n", "staging"], None)?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("import aborted at ")
            && stderr(&out).contains("0 config(s) written before it, 2 not imported"),
        "{}",
        stderr(&out)
    );
    let r = env.json(&["import", &zip_s, "-n", "staging", "--policy", "skip"])?;
    assert_eq!(r["skipCount"], 2);

    let out = env.run(&["ns", "delete", "staging"], None)?;
    assert_eq!(code(&out), Some(2), "needs --yes without a terminal");
    env.ok(&["ns", "delete", "staging", "--yes"], None)?;
    assert!(!env.ok(&["ns", "list"], None)?.contains("staging"));
    Ok(())
}

#[test]
fn schemas_set_get_ls_check_and_rm() -> TestResult {
    let env = start()?;
    // The schema commands are HTTP calls, which do not wait for a starting server.
    tokio::runtime::Runtime::new()?.block_on(env.server.api.wait_ready())?;
    let schema = env.file(
        "limits.schema.json",
        r#"{"type":"object","properties":{"limits":{"properties":{"max":{"maximum":1000}}}}}"#,
    )?;
    let set = env.json(&[
        "schema", "set", "-g", "PAYMENTS", "-d", "*.yaml", "-f", &schema, "--desc", "limits",
    ])?;
    assert_eq!(
        (&set["dataId"], &set["description"]),
        (&"*.yaml".into(), &"limits".into())
    );
    let said = env.ok(&["schema", "ls"], None)?;
    assert!(
        said.contains("PAYMENTS") && said.contains("*.yaml"),
        "{said}"
    );
    let list = env.json(&["schema", "ls", "--all"])?;
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    let one = env.json(&["schema", "get", "-g", "PAYMENTS", "-d", "*.yaml"])?;
    assert_eq!(
        one["schema"]["properties"]["limits"]["properties"]["max"]["maximum"],
        1000
    );

    // A publish that breaks it is refused (exit 6) with the path; `check` says the same.
    let bad = env.file("limits.yaml", "limits:\n  max: 5000\n")?;
    let out = env.run(&["put", "limits.yaml", &bad, "-g", "PAYMENTS"], None)?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refused /limits/max: 5000 is greater than the maximum of 1000"),
        "{}",
        stderr(&out)
    );
    let out = env.run(
        &["schema", "check", "limits.yaml", &bad, "-g", "PAYMENTS"],
        None,
    )?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert!(
        printed(&out).contains("refused /limits/max"),
        "{}",
        printed(&out)
    );
    let good = env.file("good.yaml", "limits:\n  max: 10\n")?;
    let said = env.ok(
        &["schema", "check", "limits.yaml", &good, "-g", "PAYMENTS"],
        None,
    )?;
    assert!(
        said.contains("valid against public>>PAYMENTS>>*.yaml"),
        "{said}"
    );
    env.ok(&["put", "limits.yaml", &good, "-g", "PAYMENTS"], None)?;

    // A schema that does not compile is refused; removing twice is "not found" (exit 3).
    let broken = env.file("broken.json", r#"{"type": 12}"#)?;
    let out = env.run(
        &["schema", "set", "-g", "G", "-d", "x", "-f", &broken],
        None,
    )?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("does not compile"),
        "{}",
        stderr(&out)
    );
    env.ok(&["schema", "rm", "-g", "PAYMENTS", "-d", "*.yaml"], None)?;
    let out = env.run(&["schema", "rm", "-g", "PAYMENTS", "-d", "*.yaml"], None)?;
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    let out = env.run(&["schema", "get", "-g", "PAYMENTS", "-d", "*.yaml"], None)?;
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    env.ok(&["put", "limits.yaml", &bad, "-g", "PAYMENTS"], None)?;
    Ok(())
}

#[test]
fn profiles_completions_and_help() -> TestResult {
    let env = start()?;
    // A saved profile names the server: no -s needed.
    let dir = env.config.path().join("nacelle");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("profiles.toml"),
        format!(
            "current = \"local\"\n[profiles.local]\nservers = [\"{}\"]\nnamespace = \"\"\n",
            env.addr
        ),
    )?;
    let mut c = env.command(&["put", "p.txt"]);
    c.env_remove("NACELLE_SERVER");
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("stdin")?
        .write_all(b"via profile")?;
    let out = child.wait_with_output()?;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(env.server.api_get_blocking("p.txt")?, "via profile");
    let profiles = env.json(&["profile", "list"])?;
    assert_eq!(profiles[0]["name"], "local");
    assert_eq!(profiles[0]["current"], true);
    let out = env.run(&["profile", "use", "nope"], None)?;
    assert_eq!(code(&out), Some(3));

    let bash = env.ok(&["completion", "bash"], None)?;
    assert!(bash.contains("_nacelle") && bash.contains("rollback"));
    for cmd in [
        "get", "put", "watch", "diff", "rollback", "export", "import", "login",
    ] {
        let help = env.ok(&[cmd, "--help"], None)?;
        assert!(help.contains("Examples:"), "{cmd} --help has no examples");
    }
    Ok(())
}

const ADMIN_PASSWORD: &str = "Cli-Admin-Passw0rd";

/// A server with authentication on, the administrator logged in (its profile current).
fn start_logged_in() -> TestResult<Env> {
    let env = start_with(&[
        "--auth",
        "on",
        "--auth-token-secret",
        "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        "--admin-password",
        ADMIN_PASSWORD,
    ])?;
    // The administrator is created right after the load.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = env.run(
            &["login", "--username", "nacos", "--password", ADMIN_PASSWORD],
            None,
        )?;
        if out.status.success() {
            assert!(String::from_utf8(out.stdout)?.starts_with("logged in as nacos"));
            return Ok(env);
        }
        if Instant::now() > deadline {
            return Err(format!("login never worked: {}", stderr(&out)).into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The entries of a JSON array answer.
fn items(v: &Value) -> TestResult<&Vec<Value>> {
    v.as_array()
        .ok_or_else(|| format!("not an array: {v}").into())
}

#[test]
fn gray_releases_by_ips_and_by_app() -> TestResult {
    let env = start_logged_in()?;
    env.ok(&["put", "app.yaml"], Some("v: 1\n"))?;
    let said = env.ok(
        &[
            "gray",
            "create",
            "app.yaml",
            "--ips",
            "10.0.0.7,10.1.0.0/16",
        ],
        Some("v: beta\n"),
    )?;
    assert!(said.contains("published gray `beta`"), "{said}");
    let canary = env.file("canary.yaml", "v: canary\n")?;
    let v = env.json(&[
        "gray",
        "create",
        "app.yaml",
        &canary,
        "--app",
        "shop",
        "--name",
        "shop-canary",
        "--priority",
        "10",
    ])?;
    assert_eq!(v["name"], "shop-canary");

    // Listed highest priority first: the beta, then the app's variant.
    let list = env.json(&["gray", "ls", "app.yaml"])?;
    let list = items(&list)?;
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["name"], "beta");
    assert_eq!(list[0]["type"], "beta");
    assert!(
        list[0]["rule"]
            .as_str()
            .is_some_and(|r| r.contains("10.0.0.7")),
        "{list:?}"
    );
    assert_eq!(list[0]["content"], "v: beta\n");
    assert_eq!(list[1]["name"], "shop-canary");
    assert_eq!(list[1]["priority"], 10);
    assert_eq!(list[1]["rule"], "AppName=shop");
    let table = env.ok(&["gray", "ls", "app.yaml"], None)?;
    assert!(
        table.starts_with("NAME") && table.contains("shop-canary"),
        "{table}"
    );

    // Promote the app's variant: it becomes the formal config; the beta stays.
    env.ok(
        &["gray", "promote", "app.yaml", "--name", "shop-canary"],
        None,
    )?;
    assert_eq!(env.ok(&["get", "app.yaml"], None)?, "v: canary\n");
    let list = env.json(&["gray", "ls", "app.yaml"])?;
    assert_eq!(items(&list)?.len(), 1);
    // Stop (abandon) the beta.
    let v = env.json(&["gray", "stop", "app.yaml"])?;
    assert_eq!(v["stopped"], true);
    assert!(items(&env.json(&["gray", "ls", "app.yaml"])?)?.is_empty());

    // Bad input: a clear message and the documented exit code.
    let out = env.run(&["gray", "stop", "app.yaml"], None)?;
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no gray `beta` of public/DEFAULT_GROUP/app.yaml"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["gray", "promote", "app.yaml", "--name", "gone"], Some(""))?;
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    let out = env.run(
        &[
            "gray",
            "create",
            "app.yaml",
            "--ips",
            "10.0.0.7",
            "--priority",
            "5",
        ],
        Some("x"),
    )?;
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--ips makes the beta"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["gray", "create", "app.yaml", "--app", "shop"], Some("x"))?;
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("need a --name"), "{}", stderr(&out));
    let out = env.run(&["gray", "create", "app.yaml"], Some("x"))?;
    assert_eq!(code(&out), Some(2), "a rule is required: {}", stderr(&out));
    let out = env.run(
        &["gray", "create", "app.yaml", "--ips", "not-an-ip"],
        Some("x"),
    )?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("not-an-ip"), "{}", stderr(&out));
    let out = env.run(
        &[
            "gray", "create", "app.yaml", "--labels", "env==pre", "--name", "pre",
        ],
        Some("x"),
    )?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    let out = env.run(
        &["gray", "create", "missing.yaml", "--ips", "10.0.0.7"],
        Some("x"),
    )?;
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("publish the formal config"),
        "{}",
        stderr(&out)
    );
    // Without credentials: refused.
    let elsewhere = tempfile::tempdir()?;
    let out = env
        .command(&["gray", "ls", "app.yaml"])
        .env("XDG_CONFIG_HOME", elsewhere.path())
        .output()?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    for cmd in ["ls", "create", "promote", "stop"] {
        let help = env.ok(&["gray", cmd, "--help"], None)?;
        assert!(
            help.contains("Examples:"),
            "gray {cmd} --help has no examples"
        );
    }
    Ok(())
}

#[test]
fn users_roles_and_permissions() -> TestResult {
    const DEV_PASSWORD: &str = "Dev-Passw0rd-1";
    let env = start_logged_in()?;
    env.ok(&["put", "secret.txt"], Some("s"))?;
    let said = env.ok(
        &["user", "create", "dev", "--password-stdin"],
        Some(&format!("{DEV_PASSWORD}\n")),
    )?;
    assert_eq!(said, "created user dev\n");
    let users = env.json(&["user", "ls"])?;
    assert!(
        items(&users["items"])?
            .iter()
            .any(|u| u["username"] == "dev"),
        "{users}"
    );
    // No terminal to ask on and no --password-stdin: refused, nothing created.
    let out = env.run(&["user", "create", "dev2"], None)?;
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--password-stdin"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["user", "create", "dev"], Some("x\n"))?;
    assert_ne!(code(&out), Some(0), "a duplicate user");

    // The user logs in (its own profile dir) but may not read yet.
    let dev = tempfile::tempdir()?;
    let as_dev = |args: &[&str], stdin: Option<&str>| -> TestResult<Output> {
        let mut child = env
            .command(args)
            .env("XDG_CONFIG_HOME", dev.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.unwrap_or("").as_bytes())?;
        }
        Ok(child.wait_with_output()?)
    };
    let out = as_dev(
        &["login", "--username", "dev", "--password", DEV_PASSWORD],
        None,
    )?;
    assert!(out.status.success(), "{}", stderr(&out));
    let out = as_dev(&["get", "secret.txt"], None)?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));

    // A role with read on the public namespace lets it read.
    env.ok(&["role", "add", "readers", "dev"], None)?;
    env.ok(&["perm", "add", "readers", ":*:*", "r"], None)?;
    let roles = env.json(&["role", "ls", "--user", "dev"])?;
    assert!(
        items(&roles["items"])?
            .iter()
            .any(|r| r["role"] == "readers" && r["username"] == "dev"),
        "{roles}"
    );
    let perms = env.json(&["perm", "ls", "--role", "readers"])?;
    assert_eq!(perms["items"][0]["resource"], ":*:*", "{perms}");
    assert!(env.ok(&["perm", "ls"], None)?.contains("readers"));
    let out = as_dev(&["get", "secret.txt"], None)?;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout)?, "s");
    // Read only: a write is refused; and a user manages no users.
    let out = as_dev(&["put", "secret.txt"], Some("w"))?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    let out = as_dev(
        &["user", "create", "x", "--password-stdin"],
        Some("Xx-Passw0rd-1\n"),
    )?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));

    // The permission removed: denied again (exit 5).
    env.ok(&["perm", "rm", "readers", ":*:*", "r"], None)?;
    let out = as_dev(&["get", "secret.txt"], None)?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: forbidden"),
        "{}",
        stderr(&out)
    );

    // A new password: the old one no longer logs in.
    env.ok(
        &["user", "passwd", "dev", "--password-stdin"],
        Some("Dev-Passw0rd-2\n"),
    )?;
    let out = as_dev(
        &["login", "--username", "dev", "--password", DEV_PASSWORD],
        None,
    )?;
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    // The password from stdin (no terminal).
    let out = as_dev(&["login", "--username", "dev"], Some("Dev-Passw0rd-2\n"))?;
    assert!(out.status.success(), "{}", stderr(&out));

    env.ok(&["role", "rm", "readers", "dev"], None)?;
    assert!(items(&env.json(&["role", "ls", "--user", "dev"])?["items"])?.is_empty());
    env.ok(&["user", "rm", "dev"], None)?;
    let users = env.json(&["user", "ls"])?;
    assert!(
        !items(&users["items"])?
            .iter()
            .any(|u| u["username"] == "dev"),
        "{users}"
    );
    // Bad input: an unknown action is a usage error; an empty password is refused.
    let out = env.run(&["perm", "add", "readers", ":*:*", "x"], None)?;
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    let out = env.run(&["user", "create", "e", "--password-stdin"], Some("\n"))?;
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the password is empty"),
        "{}",
        stderr(&out)
    );
    for cmd in [["user", "create"], ["role", "add"], ["perm", "add"]] {
        let help = env.ok(&[cmd[0], cmd[1], "--help"], None)?;
        assert!(help.contains("Examples:"), "{cmd:?} --help has no examples");
    }
    Ok(())
}

#[test]
fn import_shows_progress_on_a_terminal_only() -> TestResult {
    let env = start()?;
    env.ok(&["put", "a.yaml"], Some("a: 1\n"))?;
    env.ok(&["put", "b.json", "-g", "G"], Some("{}"))?;
    env.ok(&["ns", "create", "copy"], None)?;
    let zip = env.work.path().join("all.zip").display().to_string();
    env.ok(&["export", "--file", &zip], None)?;
    // `script` (util-linux) runs the command on a pseudo-terminal.
    let on_tty = |args: &str| -> TestResult<String> {
        let line = format!("{NACELLE} {args}");
        let mut c = Command::new("script");
        for (k, _) in std::env::vars() {
            if k.starts_with("NACELLE_") {
                c.env_remove(k);
            }
        }
        let out = c
            .args(["-qec", &line, "/dev/null"])
            .env("XDG_CONFIG_HOME", env.config.path())
            .env("NACELLE_SERVER", &env.addr)
            .current_dir(env.work.path())
            .stdin(Stdio::null())
            .output()?;
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    };
    let shown = on_tty(&format!("import {zip} -n copy"))?;
    assert!(
        shown.contains("importing") && shown.contains('\u{1b}') && shown.contains("IMPORTED"),
        "no bar on a terminal: {shown:?}"
    );
    // The per-item result is still reported.
    let shown = on_tty(&format!("import {zip} -n copy --policy skip"))?;
    assert!(
        shown.contains("skipped (exists): G/b.json")
            && shown.contains("skipped (exists): DEFAULT_GROUP/a.yaml"),
        "{shown:?}"
    );
    // Not with --quiet nor -o json (the JSON names the skipped keys).
    let quiet = on_tty(&format!("import {zip} -n copy --policy skip --quiet"))?;
    assert!(
        !quiet.contains('\u{1b}') && !quiet.contains("importing"),
        "{quiet:?}"
    );
    let json = on_tty(&format!("import {zip} -n copy --policy skip -o json"))?;
    assert!(!json.contains('\u{1b}'), "{json:?}");
    let v: Value = serde_json::from_str(json.lines().last().ok_or("no output")?.trim())?;
    assert_eq!(v["skipCount"], 2);
    assert_eq!(items(&v["skipped"])?.len(), 2);
    // Not a terminal: one plain line on stderr, no bar.
    let out = env.run(&["import", &zip, "-n", "copy", "--policy", "skip"], None)?;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("importing") && !stderr(&out).contains('\u{1b}'),
        "{}",
        stderr(&out)
    );
    Ok(())
}

trait BlockingGet {
    fn api_get_blocking(&self, data_id: &str) -> TestResult<String>;
}

impl BlockingGet for BinaryServer {
    /// The content of a config over HTTP v1 (in a small runtime of its own).
    fn api_get_blocking(&self, data_id: &str) -> TestResult<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let got = rt.block_on(self.api.get("", "DEFAULT_GROUP", data_id))?;
        got.ok_or_else(|| format!("{data_id} not found").into())
    }
}

/// Everything a run printed, stdout and stderr.
fn printed(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` and requires exit `want` and none of `secrets` in anything it printed;
/// its stderr.
fn fails_without_secrets(cmd: &mut Command, want: i32, secrets: &[&str]) -> TestResult<String> {
    let out = cmd.stdin(Stdio::null()).output()?;
    let all = printed(&out);
    assert_eq!(code(&out), Some(want), "{cmd:?}: {all}");
    for secret in secrets {
        assert!(!all.contains(secret), "{cmd:?} printed a secret: {all}");
    }
    Ok(stderr(&out))
}

/// Writes a profile `name` (made current) of `servers` holding `token`, valid for an hour
/// as far as the CLI knows.
fn save_profile(env: &Env, name: &str, servers: &str, token: &str) -> TestResult {
    let dir = env.config.path().join("nacelle");
    std::fs::create_dir_all(&dir)?;
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        + 3600;
    std::fs::write(
        dir.join("profiles.toml"),
        format!(
            "current = \"{name}\"\n[profiles.{name}]\nservers = [\"{servers}\"]\nusername = \"nacos\"\naccess_token = \"{token}\"\ntoken_expires_at = {expires}\n"
        ),
    )?;
    Ok(())
}

/// An unreachable server: exit 4 and a message naming the server — not the password
/// (given as a flag, before or after the command, or in `NACELLE_PASSWORD`), nor the
/// profile's token; over gRPC and HTTP, for configs, admin calls and the login.
#[test]
fn an_unreachable_server_never_prints_a_secret() -> TestResult {
    const PASSWORD: &str = "cli-unreachable-Passw0rd-3e9";
    const TOKEN: &str = "cli-unreachable-token-d41";
    let env = start()?;
    let port = free_port()?;
    let nowhere = format!("127.0.0.1:{port}/{port}");
    let quick = ["--timeout-ms", "300"];
    let cred = ["--username", "nacos", "--password", PASSWORD];
    let commands: [&[&str]; 6] = [
        &["get", "app.yaml"],
        &["get", "app.yaml", "--transport", "http"],
        &["ls"],
        &["ns", "list"],
        &["history", "app.yaml"],
        &["user", "ls"],
    ];
    for args in commands {
        // Credentials after the command, before it, and in the environment.
        let mut after = env.command(args);
        after.args(["-s", &nowhere]).args(quick).args(cred);
        let e = fails_without_secrets(&mut after, 4, &[PASSWORD])?;
        assert!(
            e.starts_with("error: no server reachable: ") && e.contains("127.0.0.1"),
            "{args:?}: {e}"
        );
        let mut before = env.command(&["-s", &nowhere, "--timeout-ms", "300"]);
        before.args(cred).args(args);
        fails_without_secrets(&mut before, 4, &[PASSWORD])?;
        let mut from_env = env.command(args);
        from_env
            .args(["-s", &nowhere, "--username", "nacos"])
            .args(quick)
            .env("NACELLE_PASSWORD", PASSWORD);
        fails_without_secrets(&mut from_env, 4, &[PASSWORD])?;
    }
    let mut login = env.command(&["login", "-s", &nowhere]);
    login.args(cred);
    let e = fails_without_secrets(&mut login, 4, &[PASSWORD])?;
    assert!(e.contains("login at 127.0.0.1"), "{e}");
    // The saved token of a profile.
    save_profile(&env, "far", &nowhere, TOKEN)?;
    for args in commands {
        let mut cmd = env.command(args);
        cmd.env_remove("NACELLE_SERVER").args(quick);
        fails_without_secrets(&mut cmd, 4, &[TOKEN])?;
    }
    Ok(())
}

/// With authentication on: a wrong password (exit 5), a token the server does not know
/// and one that expired (exit 5), and errors of the server to a logged-in user (exit
/// 3 or 6) print neither the password nor the token, over gRPC and HTTP.
#[test]
fn refused_credentials_and_server_errors_never_print_a_secret() -> TestResult {
    const WRONG: &str = "cli-wrong-Passw0rd-77aa";
    const INVALID: &str = "cli-invalid-token-0b5";
    let env = start_with(&[
        "--auth",
        "on",
        "--auth-token-secret",
        "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        "--admin-password",
        ADMIN_PASSWORD,
        "--auth-token-ttl-s",
        "1",
    ])?;
    // The administrator is created right after the load; log in as it (1 s token).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = env.run(
            &[
                "login",
                "--username",
                "nacos",
                "--password",
                ADMIN_PASSWORD,
                "--save-as",
                "old",
            ],
            None,
        )?;
        if out.status.success() {
            assert!(!printed(&out).contains(ADMIN_PASSWORD));
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("login never worked: {}", stderr(&out)).into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let file = env.config.path().join("nacelle").join("profiles.toml");
    let saved = std::fs::read_to_string(&file)?;
    let expired = saved
        .lines()
        .find_map(|l| l.strip_prefix("access_token = \""))
        .and_then(|l| l.strip_suffix('"'))
        .ok_or("no token saved")?
        .to_string();
    let listed = env.ok(&["profile", "list", "-o", "json"], None)?;
    assert!(
        !listed.contains(&expired),
        "profile list shows the token: {listed}"
    );
    let transports: [&[&str]; 2] = [&[], &["--transport", "http"]];

    // A wrong password.
    let mut login = env.command(&["login", "--username", "nacos", "--password", WRONG]);
    let e = fails_without_secrets(&mut login, 5, &[WRONG])?;
    assert!(e.starts_with("error: login failed: nacos at"), "{e}");
    for t in transports {
        let mut cmd = env.command(&[
            "get",
            "app.yaml",
            "--username",
            "nacos",
            "--password",
            WRONG,
        ]);
        cmd.args(t);
        let e = fails_without_secrets(&mut cmd, 5, &[WRONG])?;
        assert!(e.contains("login failed"), "{e}");
    }

    // A token the server never issued, and one that expired (the CLI believes it valid).
    std::thread::sleep(Duration::from_millis(2000));
    for token in [INVALID, expired.as_str()] {
        save_profile(&env, "stale", &env.addr, token)?;
        for args in [
            &["get", "app.yaml"][..],
            &["ls"],
            &["ns", "list"],
            &["history", "app.yaml"],
        ] {
            for t in transports {
                let mut cmd = env.command(args);
                cmd.args(t);
                let e = fails_without_secrets(&mut cmd, 5, &[token, ADMIN_PASSWORD])?;
                assert!(e.starts_with("error: forbidden"), "{args:?} {t:?}: {e}");
            }
        }
    }

    // Errors of the server to a user logged in by flags.
    let cred = ["--username", "nacos", "--password", ADMIN_PASSWORD];
    for t in transports {
        let mut bad_name = env.command(&["put", "bad name!"]);
        bad_name.args(cred).args(t);
        let out = bad_name.stdin(Stdio::null()).output()?;
        assert_eq!(code(&out), Some(6), "{}", printed(&out));
        assert!(!printed(&out).contains(ADMIN_PASSWORD), "{}", printed(&out));
        let mut missing = env.command(&["get", "missing.yaml"]);
        missing.args(cred).args(t);
        fails_without_secrets(&mut missing, 3, &[ADMIN_PASSWORD, &expired])?;
        let mut rollback = env.command(&["rollback", "missing.yaml", "--to", "999999", "--yes"]);
        rollback.args(cred).args(t);
        fails_without_secrets(&mut rollback, 3, &[ADMIN_PASSWORD, &expired])?;
    }
    Ok(())
}

/// Client flags before the command, as kubectl and etcdctl take them: `-n`, `-o`, `-s`,
/// `--profile`; the same flag after the command wins; on `serve` they are refused.
#[test]
fn client_flags_before_the_command() -> TestResult {
    let env = start()?;
    env.ok(&["-n", "dev", "put", "app.yaml"], Some("a: 1\n"))?;
    assert_eq!(env.ok(&["-n", "dev", "get", "app.yaml"], None)?, "a: 1\n");
    let got: Value =
        serde_json::from_str(&env.ok(&["-n", "dev", "-o", "json", "get", "app.yaml"], None)?)?;
    assert_eq!(got["namespace"], "dev");
    let listed: Value = serde_json::from_str(&env.ok(&["-o", "json", "-n", "dev", "ls"], None)?)?;
    assert!(listed.to_string().contains("app.yaml"), "{listed}");
    let public: Value = serde_json::from_str(&env.ok(&["-o", "json", "ls"], None)?)?;
    assert!(!public.to_string().contains("app.yaml"), "{public}");
    // After the command wins over before it.
    let out = env.run(&["-n", "dev", "get", "app.yaml", "-n", "public"], None)?;
    assert_eq!(code(&out), Some(3), "{}", printed(&out));
    // -s before the command is the server used.
    let port = free_port()?;
    let out = env.run(
        &[
            "-s",
            &format!("127.0.0.1:{port}/{port}"),
            "--timeout-ms",
            "300",
            "get",
            "app.yaml",
        ],
        None,
    )?;
    assert_eq!(code(&out), Some(4), "{}", printed(&out));
    // --profile before the command is the profile used.
    let out = env.run(&["--profile", "nope", "get", "app.yaml"], None)?;
    assert_eq!(code(&out), Some(3), "{}", printed(&out));
    assert!(
        stderr(&out).contains("no profile `nope`"),
        "{}",
        printed(&out)
    );
    // Nested commands too.
    assert!(env
        .ok(&["-o", "json", "ns", "list"], None)?
        .starts_with('['));
    // Not a client command: refused, with the reason.
    let out = env.run(&["-n", "dev", "serve", "--port", "0"], None)?;
    assert_eq!(code(&out), Some(2), "{}", printed(&out));
    assert!(
        stderr(&out).contains("--namespace is a flag of the client commands"),
        "{}",
        printed(&out)
    );
    let out = env.run(&["check", "-o", "json"], None)?;
    assert_eq!(code(&out), Some(2), "{}", printed(&out));
    Ok(())
}

/// `serve`'s switches work bare (`--auth-anonymous-read`), with `=true`/`=false`, with
/// the old `--flag true`, and from the settings file.
#[test]
fn serve_switches_work_bare_and_with_a_value() -> TestResult {
    let auth = [
        "--auth",
        "on",
        "--auth-token-secret",
        "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        "--admin-password",
        ADMIN_PASSWORD,
    ];
    let conf = tempfile::tempdir()?;
    let file = conf.path().join("nacelle.toml");
    std::fs::write(&file, "auth_anonymous_read = true\n")?;
    let file = file.display().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let http = reqwest::Client::new();
    let cases: [(&[&str], u16); 6] = [
        (&[], 403),
        (&["--auth-anonymous-read"], 404),
        (&["--auth-anonymous-read=true"], 404),
        (&["--auth-anonymous-read=false"], 403),
        (&["--auth-anonymous-read", "true"], 404),
        (&["--config", &file], 404),
    ];
    for (flags, status) in cases {
        let data = tempfile::tempdir()?;
        let mut args = auth.to_vec();
        args.extend_from_slice(flags);
        let server = BinaryServer::spawn(NACELLE, data.path(), &args)?;
        let url = server.url("/nacos/v1/cs/configs?dataId=none.yaml&group=DEFAULT_GROUP");
        // Anonymous: 404 when anonymous reads are on, 403 when not (503 until ready).
        let got = rt.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let code = http.get(&url).send().await?.status().as_u16();
                if code == 403 || code == 404 || Instant::now() > deadline {
                    return Ok::<u16, reqwest::Error>(code);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })?;
        assert_eq!(got, status, "serve {flags:?}");
    }
    Ok(())
}

/// With a review policy, `put` is refused with the policy's name; a change request opened,
/// approved by another user (who holds `a`) and published writes both its keys.
#[test]
fn change_requests_and_review_policies() -> TestResult {
    let env = start_logged_in()?;
    env.ok(&["put", "app.yaml"], Some("a: 1\n"))?;
    for (user, role, action) in [("dev", "devs", "rw"), ("rev", "reviewers", "rwa")] {
        env.ok(
            &["user", "create", user, "--password-stdin"],
            Some("Cli-User-Passw0rd\n"),
        )?;
        env.ok(&["role", "add", role, user], None)?;
        env.ok(&["perm", "add", role, ":*:*", action], None)?;
    }
    let said = env.ok(&["policy", "set", "--approvals", "1"], None)?;
    assert!(said.contains("direct writes refused"), "{said}");
    let policies = env.json(&["policy", "ls"])?;
    assert_eq!(policies[0]["approvals"], 1, "{policies}");

    let out = env.run(&["put", "app.yaml"], Some("a: 9\n"))?;
    assert_eq!(code(&out), Some(5), "{}", printed(&out));
    assert!(stderr(&out).contains("review policy"), "{}", stderr(&out));

    fn as_user(user: &str) -> Vec<&str> {
        vec!["--username", user, "--password", "Cli-User-Passw0rd"]
    }
    let app = env.file("app.yaml", "a: 2\n")?;
    let new = env.file("new.yaml", "n: 1\n")?;
    let (put_app, put_new) = (format!("app.yaml={app}"), format!("new.yaml={new}"));
    let mut create = vec!["change", "create", "-t", "raise a", "--put", &put_app];
    create.extend(["--put", &put_new, "-o", "json"]);
    create.extend(as_user("dev"));
    let cr: Value = serde_json::from_str(&env.ok(&create, None)?)?;
    assert_eq!(cr["state"], "open", "{cr}");
    let id = cr["id"].to_string();

    let mut diff = vec!["change", "diff", id.as_str()];
    diff.extend(as_user("rev"));
    let shown = env.ok(&diff, None)?;
    assert!(
        shown.contains("-a: 1") && shown.contains("+a: 2"),
        "{shown}"
    );
    assert!(shown.contains("+n: 1"), "{shown}");

    let mut approve_own = vec!["change", "approve", id.as_str()];
    approve_own.extend(as_user("dev"));
    let out = env.run(&approve_own, None)?;
    assert_eq!(code(&out), Some(5), "{}", printed(&out));
    let mut approve = vec!["change", "approve", id.as_str(), "-m", "ok", "-o", "json"];
    approve.extend(as_user("rev"));
    let cr: Value = serde_json::from_str(&env.ok(&approve, None)?)?;
    assert_eq!(cr["state"], "approved", "{cr}");
    assert_eq!(cr["approvers"], serde_json::json!(["rev"]));

    let mut publish = vec!["change", "publish", id.as_str()];
    publish.extend(as_user("dev"));
    let said = env.ok(&publish, None)?;
    assert!(said.contains("published"), "{said}");
    assert_eq!(env.ok(&["get", "app.yaml"], None)?, "a: 2\n");
    assert_eq!(env.ok(&["get", "new.yaml"], None)?, "n: 1\n");
    let listed = env.json(&["change", "ls"])?;
    assert_eq!(listed[0]["state"], "published", "{listed}");
    let shown = env.ok(&["change", "show", id.as_str()], None)?;
    assert!(shown.contains("approved rev: ok"), "{shown}");

    // Usage errors say what is wrong.
    let out = env.run(&["change", "create", "-t", "nothing"], None)?;
    assert_eq!(code(&out), Some(2), "{}", printed(&out));
    let out = env.run(&["change", "show", "999999"], None)?;
    assert_eq!(code(&out), Some(3), "{}", printed(&out));
    env.ok(&["policy", "rm"], None)?;
    env.ok(&["put", "app.yaml"], Some("a: 3\n"))?;
    Ok(())
}

/// Polls `nacelle clients KEY -o json` until `done` holds (within `SOON`).
fn clients_until(env: &Env, key: &str, done: impl Fn(&Value) -> bool) -> TestResult<Value> {
    let deadline = std::time::Instant::now() + nacelle_testkit::SOON;
    loop {
        let v = env.json(&["clients", key])?;
        if done(&v) {
            return Ok(v);
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("nacelle clients never showed it: {v}").into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn clients_shows_who_runs_what() -> TestResult {
    let env = start()?;
    env.ok(&["put", "live.txt"], Some("one"))?;
    let none = env.json(&["clients", "live.txt"])?;
    assert_eq!(none["total"]["total"], 0, "{none}");
    assert_eq!(none["formalMd5"], nacelle_testkit::md5("one").as_str());

    // `nacelle watch` is a gRPC listener of the key.
    let mut watcher = env
        .command(&["watch", "live.txt"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let one = clients_until(&env, "live.txt", |v| v["total"]["formal"] == 1);
    let table = env.ok(&["clients", "live.txt"], None);
    let summary = env.ok(&["clients", "live.txt", "--summary"], None);
    watcher.kill()?;
    watcher.wait()?;
    let one = one?;
    let client = &one["nodes"][0]["clients"][0];
    assert_eq!(client["protocol"], "grpc", "{one}");
    assert_eq!(client["holds"], "formal", "{one}");
    let table = table?;
    assert!(table.contains("1 clients: 1 formal, 0 unknown"), "{table}");
    assert!(table.contains("HOLDS") && table.contains("grpc"), "{table}");
    let summary = summary?;
    assert!(
        summary.contains("1 clients: 1 formal") && !summary.contains("HOLDS"),
        "{summary}"
    );
    clients_until(&env, "live.txt", |v| v["total"]["total"] == 0)?;

    // A bad key is the server's 400, as the CLI's usage error.
    let out = env.run(&["clients", ""], None)?;
    assert_ne!(code(&out), Some(0), "{}", stderr(&out));
    Ok(())
}

/// A webhook receiver for the CLI's test: a plain HTTP/1.1 server on a thread that answers
/// every request 200 and closes, sending each body it got.
fn tiny_receiver() -> TestResult<(String, std::sync::mpsc::Receiver<String>)> {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // The head, then as many body bytes as Content-Length says.
            let (head_end, length) = loop {
                let Ok(n) = conn.read(&mut chunk) else {
                    break (0, 0);
                };
                if n == 0 {
                    break (0, 0);
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (end + 4, length);
                }
            };
            while head_end > 0 && buf.len() < head_end + length {
                match conn.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let _answered = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let body = String::from_utf8_lossy(&buf[head_end.min(buf.len())..]).to_string();
            if tx.send(body).is_err() {
                return;
            }
        }
    });
    Ok((url, rx))
}

#[test]
fn webhooks_add_ls_deliveries_and_rm() -> TestResult {
    let env = start_logged_in()?;
    let (url, got) = tiny_receiver()?;
    let secret = "cli-webhook-secret";
    // The secret from stdin; only publishes of `*.yaml` keys.
    let added = {
        let out = env.run(
            &[
                "webhook",
                "add",
                &url,
                "-d",
                "*.yaml",
                "--events",
                "publish",
                "--secret-stdin",
                "-o",
                "json",
            ],
            Some(&format!("{secret}\n")),
        )?;
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout)?;
        v
    };
    let id = added["id"].as_i64().ok_or("no id")?.to_string();
    assert_eq!(added["events"], serde_json::json!(["publish"]), "{added}");
    assert_eq!(added["dataId"], "*.yaml", "{added}");

    // Bad input: a clear refusal, and no secret means usage.
    let out = env.run(&["webhook", "add", "ftp://x/y", "--secret", secret], None)?;
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("http://"), "{}", stderr(&out));
    let out = env.run(&["webhook", "add", &url], None)?;
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));

    // Listed with its fingerprint, never the secret.
    let table = env.ok(&["webhook", "ls"], None)?;
    assert!(table.contains(&url) && table.contains("sha256:"), "{table}");
    assert!(!table.contains(secret), "{table}");
    let list = env.json(&["webhook", "ls"])?;
    assert_eq!(items(&list)?.len(), 1, "{list}");
    assert!(!list.to_string().contains(secret), "{list}");

    // A publish reaches the receiver; the log says so.
    let file = env.file("app.yaml", "a: 1\n")?;
    env.ok(&["put", "app.yaml", &file], None)?;
    let body = got.recv_timeout(Duration::from_secs(30))?;
    let event: Value = serde_json::from_str(&body)?;
    assert_eq!(
        (&event["kind"], &event["dataId"]),
        (&"publish".into(), &"app.yaml".into())
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = env.json(&["webhook", "deliveries", &id])?;
        let items = items(&log["items"])?;
        if items.first().is_some_and(|d| d["status"] == "delivered") {
            assert_eq!(items[0]["attempts"], 1, "{log}");
            assert_eq!(items[0]["lastCode"], 200, "{log}");
            break;
        }
        assert!(Instant::now() < deadline, "never delivered: {log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let table = env.ok(&["webhook", "deliveries", &id], None)?;
    assert!(
        table.contains("publish") && table.contains("delivered"),
        "{table}"
    );
    // Sent again on request.
    let log = env.json(&["webhook", "deliveries", &id])?;
    let delivery = log["items"][0]["id"].to_string();
    let said = env.ok(&["webhook", "redeliver", &delivery], None)?;
    assert!(said.contains("sent again"), "{said}");
    let again: Value = serde_json::from_str(&got.recv_timeout(Duration::from_secs(30))?)?;
    assert_eq!(again["id"], event["id"], "the same event");

    // Removed: gone from the list; removing again is not found (exit 3).
    let said = env.ok(&["webhook", "rm", &id], None)?;
    assert!(said.contains("removed"), "{said}");
    assert!(items(&env.json(&["webhook", "ls"])?)?.is_empty());
    let out = env.run(&["webhook", "rm", &id], None)?;
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    Ok(())
}

/// An 11 MiB `put` is refused for its size, over gRPC (the server's inbound limit, Nacos's
/// `RESOURCE_EXHAUSTED`) and over HTTP (413) alike: the CLI says so and exits 6, never
/// "no server reachable"; the config is not written.
#[test]
fn a_put_over_the_size_limit_says_so() -> TestResult {
    let env = start()?;
    let big = "x".repeat(11 << 20);
    let file = env.file("big.txt", &big)?;
    for (transport, says) in [
        // The gRPC status names the server's inbound limit.
        ("grpc", "too large for 127.0.0.1"),
        ("grpc", "exceeds maximum size"),
        // The service's content limit.
        ("http", "too long content, over 10485760 bytes"),
    ] {
        let out = env.run(&["put", "big.txt", &file, "--transport", transport], None)?;
        let err = stderr(&out);
        assert_eq!(code(&out), Some(6), "{transport}: {err}");
        assert!(!err.contains("no server reachable"), "{transport}: {err}");
        assert!(err.contains(says), "{transport}: {err}");
        let out = env.run(&["get", "big.txt"], None)?;
        assert_eq!(code(&out), Some(3), "not written: {}", stderr(&out));
    }
    Ok(())
}
