//! The smoke run of every fuzz target on stable: each target's body over each file of its
//! committed seed corpus (`fuzz/corpus/<target>/`) and over the crash regressions
//! (`fuzz/regressions/<target>/`, when present). A target without a corpus fails.

use std::path::PathBuf;

fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &std::path::Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

fn run(name: &str) {
    let (_, body) = nacelle_fuzzing::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a known target");
    let root = corpus_root();
    let seeds = files(&root.join("corpus").join(name));
    assert!(
        seeds.len() >= 3,
        "{name}: {} seed files, want at least 3",
        seeds.len()
    );
    for file in seeds
        .iter()
        .chain(files(&root.join("regressions").join(name)).iter())
    {
        let data = std::fs::read(file).expect("readable corpus file");
        body(&data);
        // Every prefix too: truncated input is the commonest malformed input.
        for end in (0..data.len()).step_by((data.len() / 16).max(1)) {
            body(&data[..end]);
        }
    }
}

#[test]
fn listening_configs_corpus() {
    run("listening_configs");
}

#[test]
fn form_corpus() {
    run("form");
}

#[test]
fn grpc_frames_corpus() {
    run("grpc_frames");
}

#[test]
fn proto_json_corpus() {
    run("proto_json");
}

#[test]
fn gray_rule_corpus() {
    run("gray_rule");
}

#[test]
fn jwt_corpus() {
    run("jwt");
}

#[test]
fn permission_corpus() {
    run("permission");
}

#[test]
fn every_target_has_a_test() {
    let names: Vec<&str> = nacelle_fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "listening_configs",
            "form",
            "grpc_frames",
            "proto_json",
            "gray_rule",
            "jwt",
            "permission"
        ]
    );
}

/// The `jwt` seeds reach both sides: one verifies (so the re-signing check runs), the
/// others are refused.
#[test]
fn the_jwt_seeds_hold_one_valid_token() {
    let dir = corpus_root().join("corpus/jwt");
    let valid = std::fs::read_to_string(dir.join("valid")).expect("the valid seed");
    let claims = nacelle_service::auth::jwt::verify(
        nacelle_fuzzing::JWT_KEY,
        &valid,
        nacelle_fuzzing::JWT_NOW,
    )
    .expect("the valid seed verifies");
    assert_eq!(claims.sub, "nacos");
    for refused in ["expired", "other-secret", "alg-none"] {
        let token = std::fs::read_to_string(dir.join(refused)).expect("a seed");
        assert!(
            nacelle_service::auth::jwt::verify(
                nacelle_fuzzing::JWT_KEY,
                &token,
                nacelle_fuzzing::JWT_NOW
            )
            .is_err(),
            "{refused} verified"
        );
    }
}
