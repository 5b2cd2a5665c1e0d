//! The code layout of release builds (`build.rs`, `build/link_order.rs`): the committed
//! list is well formed, the hash-free patterns are what the linker expects, and a program
//! links and runs with the very linker script and ordering file a release build of the
//! server gets. CI builds only in debug, where the layout is off, so this is what keeps a
//! broken list from failing the README's `cargo run --release` instead.

#[path = "../build/link_order.rs"]
mod link_order;

use std::path::Path;
use std::process::Command;

fn committed_list() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("link-order.txt");
    std::fs::read_to_string(&path).expect("crates/nacelle/link-order.txt")
}

#[test]
fn without_hash_turns_the_build_specific_parts_into_wildcards() {
    let cases = [
        (
            "_ZN7nacelle4main17h19babc5aaa4c7689E",
            "_ZN7nacelle4main17h*",
        ),
        (
            "_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$11finish_grow17h1f1a1a770fbbde92E.llvm.11962959667045250634",
            "_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$11finish_grow17h*",
        ),
        (
            "_RNvXsZ_NtNtCsgEmfK2I1SDS_4core3fmt3numjNtB7_5Debug3fmt.llvm.15965785119611448778",
            "_RNvXsZ_NtNtCsgEmfK2I1SDS_4core3fmt3numjNtB7_5Debug3fmt.llvm.*",
        ),
        // A v0 name carries no hash of its own, a C name neither: both stay as they are.
        (
            "_RNvMs8_NtCsjrHSEGnQ3l9_3std4pathNtB5_10Components7as_path",
            "_RNvMs8_NtCsjrHSEGnQ3l9_3std4pathNtB5_10Components7as_path",
        ),
        ("mi_thread_id", "mi_thread_id"),
        // Not a hash: not hex, or not 16 digits.
        (
            "_ZN7nacelle4main17hxyzxyzxyzxyzxyzxE",
            "_ZN7nacelle4main17hxyzxyzxyzxyzxyzxE",
        ),
        ("_ZN4main17h0123E", "_ZN4main17h0123E"),
        ("f.llvm.12x", "f.llvm.12x"),
        ("", ""),
        ("é17h0123456789abcdefE", "é17h0123456789abcdefE"),
    ];
    for (name, pattern) in cases {
        assert_eq!(link_order::without_hash(name), pattern, "{name}");
    }
}

#[test]
fn names_keeps_only_what_a_linker_script_can_carry() {
    let list = "# header\n\n  _ZN1a17h0123456789abcdefE  \nbad name\nb*c\nmi_x\n$x.y_z\n";
    assert_eq!(
        link_order::names(list),
        ["_ZN1a17h0123456789abcdefE", "mi_x", "$x.y_z"]
    );
    assert!(link_order::is_symbol(
        "_ZN4core3ptr13drop_in_place$LT$T$GT$17h0123456789abcdefE"
    ));
    assert!(!link_order::is_symbol("a(b)"));
    assert!(!link_order::is_symbol("a?"));
}

#[test]
fn the_script_places_exact_names_first_and_patterns_after_text() {
    let names = [
        "_ZN1a17h0000000000000001E",
        "_ZN1a17h0000000000000002E",
        "plain",
        "_ZN1a17h0000000000000001E",
    ];
    let script = link_order::linker_script(&names);
    let run = script.find(".text.nacelle_run").expect("first section");
    let like = script.find(".text.nacelle_like").expect("second section");
    assert!(run < like);
    let (first, second) = script.split_at(like);
    // Each exact name once, in list order, plain and cold.
    assert_eq!(
        first
            .matches("*(.text._ZN1a17h0000000000000001E .text.unlikely._ZN1a17h0000000000000001E)")
            .count(),
        1
    );
    let one = first.find("0000000000000001E)").expect("first name");
    let two = first.find("0000000000000002E)").expect("second name");
    assert!(one < two);
    assert!(first.contains("*(.text.plain .text.unlikely.plain)"));
    assert!(first.contains("INSERT BEFORE .text;"));
    // The two hashed names share one pattern; the plain name needs none.
    assert_eq!(
        second
            .matches("*(.text._ZN1a17h* .text.unlikely._ZN1a17h*)")
            .count(),
        1
    );
    assert!(!second.contains("plain"));
    assert!(second.trim_end().ends_with("INSERT AFTER .text;"));
    assert_eq!(
        link_order::ordering_file(&names[..2]),
        "_ZN1a17h0000000000000001E\n_ZN1a17h0000000000000002E\n"
    );
}

#[test]
fn the_committed_list_is_well_formed() {
    let list = committed_list();
    let lines: Vec<&str> = list.lines().filter(|l| !l.starts_with('#')).collect();
    let names = link_order::names(&list);
    assert!(
        names.len() > 1000,
        "only {} names: regenerate with scripts/link-order.sh",
        names.len()
    );
    assert_eq!(
        names.len(),
        lines.len(),
        "lines the linker script would drop"
    );
    let mut seen = std::collections::HashSet::new();
    for name in &names {
        assert!(seen.insert(name), "{name} twice");
    }
}

#[test]
fn minor_version_reads_rustc_version() {
    assert_eq!(
        link_order::minor_version("rustc 1.95.0 (59807616e 2026-04-14)"),
        Some(95)
    );
    assert_eq!(
        link_order::minor_version("rustc 1.90.0-nightly (abc 2025-06-01)"),
        Some(90)
    );
    assert_eq!(link_order::minor_version("rustc 2.0.0"), None);
    assert_eq!(link_order::minor_version("garbage"), None);
}

/// Links a program with the script and ordering file made from the committed list, as a
/// release build of the server does (rustc's default LLD on x86_64 Linux), and runs it.
#[test]
fn a_program_links_and_runs_with_the_generated_layout() {
    if !cfg!(all(
        target_arch = "x86_64",
        target_os = "linux",
        target_env = "gnu"
    )) {
        eprintln!("SKIPPED a_program_links_and_runs_with_the_generated_layout (not x86_64 Linux GNU: build.rs passes no layout there)");
        return;
    }
    let list = committed_list();
    let names = link_order::names(&list);
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("link-order.ld");
    let order = dir.path().join("link-order.sym");
    std::fs::write(&script, link_order::linker_script(&names)).expect("script");
    std::fs::write(&order, link_order::ordering_file(&names)).expect("ordering file");
    let source = dir.path().join("main.rs");
    std::fs::write(
        &source,
        "use std::collections::HashMap;\n\
         fn main() {\n\
             let mut m: HashMap<String, usize> = HashMap::new();\n\
             for w in std::env::args().skip(1) { *m.entry(w).or_default() += 1; }\n\
             let mut v: Vec<_> = m.into_iter().collect();\n\
             v.sort();\n\
             println!(\"{v:?}\");\n\
         }\n",
    )
    .expect("source");
    let program = dir.path().join("program");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args(["--edition", "2021", "-C", "opt-level=2"])
        .arg("-C")
        .arg(format!("link-arg=-Wl,-T,{}", script.display()))
        .arg("-C")
        .arg(format!(
            "link-arg=-Wl,--symbol-ordering-file={}",
            order.display()
        ))
        .args(["-C", "link-arg=-Wl,--no-warn-symbol-ordering", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .expect("run rustc");
    assert!(
        out.status.success(),
        "linking with the generated layout failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&program)
        .args(["b", "a", "b"])
        .output()
        .expect("run the program");
    assert!(run.status.success());
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        r#"[("a", 1), ("b", 2)]"#
    );
}
