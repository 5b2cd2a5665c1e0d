//! What `nacelle serve` (the real binary) refuses at start, and what its text logs look
//! like where they go: colour on a terminal only.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use nacelle_testkit::TestResult;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");

/// `nacelle serve` on free ports in `dir` with `extra`; its exit status and stderr, for a
/// start that must fail.
fn refused_start(dir: &std::path::Path, extra: &[&str]) -> TestResult<String> {
    let out = Command::new(NACELLE)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args(["--port", "0", "--grpc-port", "0", "--bind", "127.0.0.1"])
        .args(extra)
        .env_remove("NACELLE_CLUSTER_SECRET")
        .env_remove("NACELLE_DB")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "started: {stderr}");
    Ok(stderr)
}

/// Text logs into a pipe (as into a file or the journal) carry no escape sequence.
/// The log a started server wrote (its stderr, piped) up to its "http listening on" line;
/// the server is then killed.
fn log_until_listening(child: &mut std::process::Child) -> TestResult<String> {
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut seen = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line?;
        let listening = line.contains("http listening on");
        seen.push(line);
        if listening {
            break;
        }
    }
    let _gone = child.kill();
    let _reaped = child.wait();
    Ok(seen.join("\n"))
}

#[test]
fn text_logs_into_a_pipe_have_no_colour() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut child = Command::new(NACELLE)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--port", "0", "--grpc-port", "0", "--bind", "127.0.0.1"])
        .args(["--log-format", "text"])
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let log = log_until_listening(&mut child)?;
    assert!(log.contains("http listening on"), "{log}");
    assert!(log.contains("INFO"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "an escape sequence in a pipe: {log:?}"
    );
    Ok(())
}

/// On a terminal (a pseudo-terminal from `script`) the levels are coloured; `NO_COLOR`
/// turns that off there too.
#[test]
fn text_logs_on_a_terminal_are_coloured_unless_no_color() -> TestResult {
    if Command::new("script").arg("--version").output().is_err() {
        println!("SKIPPED: no `script` (util-linux) to give the server a terminal");
        return Ok(());
    }
    for no_color in [None, Some("1")] {
        let dir = tempfile::tempdir()?;
        // `timeout` ends the server; everything it logged until then is on the terminal.
        let inner = format!(
            "timeout -s TERM 4 {NACELLE} serve --data-dir {} --port 0 --grpc-port 0 \
             --bind 127.0.0.1 --log-format text",
            dir.path().display()
        );
        let mut cmd = Command::new("script");
        cmd.args(["-q", "-e", "-c", &inner, "/dev/null"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .stdout(Stdio::piped());
        match no_color {
            Some(v) => cmd.env("NO_COLOR", v),
            None => cmd.env_remove("NO_COLOR"),
        };
        let mut child = cmd.spawn()?;
        let mut out = String::new();
        child
            .stdout
            .take()
            .ok_or("no stdout")?
            .read_to_string(&mut out)?;
        let _status = child.wait()?;
        assert!(out.contains("http listening on"), "{out}");
        let coloured = out.contains("\u{1b}[");
        assert_eq!(
            coloured,
            no_color.is_none(),
            "NO_COLOR={no_color:?}: {out:?}"
        );
    }
    Ok(())
}

/// The cluster secret of `packaging/k8s/secret.example.yaml`, applied as it is, stops the
/// start (from the flag and from a mounted file alike), and so does a weak one; the
/// secret itself is not printed.
#[test]
fn the_example_cluster_secret_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/k8s/secret.example.yaml"
    ))?;
    let placeholder = example
        .lines()
        .find_map(|l| l.trim().strip_prefix("cluster-secret:"))
        .map(|v| v.trim().trim_matches('"').to_string())
        .ok_or("no cluster-secret in secret.example.yaml")?;
    let file = dir.path().join("cluster-secret");
    std::fs::write(&file, format!("{placeholder}\n"))?;
    let file = file.display().to_string();
    let members = ["--members", "127.0.0.1:1,127.0.0.1:2"];
    for secret in [
        ["--cluster-secret", placeholder.as_str()],
        ["--cluster-secret-file", file.as_str()],
        ["--cluster-secret", "aaaaaaaaaaaaaaaaaaaaaaaa"],
    ] {
        let err = refused_start(dir.path(), &[&members[..], &secret[..]].concat())?;
        assert!(err.contains("cluster_secret"), "{err}");
        assert!(
            !err.contains(secret[1]) || secret[0] == "--cluster-secret-file",
            "{err}"
        );
    }
    Ok(())
}

/// Members on the embedded SQLite database: refused, saying why and what to do.
#[test]
fn members_on_sqlite_are_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let err = refused_start(
        dir.path(),
        &[
            "--members",
            "127.0.0.1:1,127.0.0.1:2",
            "--cluster-secret",
            "mQ2Vb8hS0vFZ4n1oYl7TqkXc3eJ9u6Ra",
        ],
    )?;
    assert!(
        err.contains("SQLite") && err.contains("cannot share"),
        "{err}"
    );
    assert!(err.contains("--db"), "{err}");
    assert!(
        !dir.path().join("nacelle.db").exists(),
        "no database was made"
    );
    Ok(())
}

/// `NACELLE_DB_FILE`: the database URL read from a (mounted secret) file.
#[test]
fn the_database_url_is_read_from_a_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("elsewhere.db");
    let url_file = dir.path().join("db-url");
    std::fs::write(&url_file, format!("sqlite://{}\n", db.display()))?;
    let mut child = Command::new(NACELLE)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--port", "0", "--grpc-port", "0", "--bind", "127.0.0.1"])
        .env("NACELLE_DB_FILE", &url_file)
        .env_remove("NACELLE_DB")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let log = log_until_listening(&mut child)?;
    assert!(log.contains("http listening on"), "{log}");
    assert!(
        db.exists(),
        "the database named in the file was used: {log}"
    );
    assert!(!dir.path().join("data/nacelle.db").exists());
    Ok(())
}
