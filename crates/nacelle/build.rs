//! Lays out the `nacelle` binary's code in the order of `link-order.txt`: the functions a
//! server runs at start, when idle and when serving, packed together ahead of the rest of
//! `.text` (`scripts/link-order.sh` regenerates the list from a callgrind run). The kernel
//! maps an executable's code in 64 KiB windows around each page that runs, so with the
//! functions in the compiler's order a server that runs 3 MiB of code keeps most of its
//! 17 MiB of text resident; packed, it keeps about what it runs (docs/benchmarks.md, "Idle
//! RSS by code layout").
//!
//! Only the layout changes, never the code. The list holds exact symbol names, whose
//! `17h…E` hash depends on the features Cargo unifies for the build (so on the `-p`
//! packages named), the profile, the toolchain and the dependency versions, and whose
//! ThinLTO suffix `.llvm.N` changes with the code of its codegen unit. Three things place
//! them, each catching what the one before misses:
//! - a linker script's output section before `.text` takes the listed names' sections in
//!   list order (they match the build the list was made from, `cargo build --release -p
//!   nacelle`);
//! - `--symbol-ordering-file` with the same names moves, to the front of `.text`, listed
//!   functions whose section has another name (a function LLVM merged into an identical
//!   one answers to both names, C code in `.text.startup`);
//! - a second output section, after `.text`, takes the sections matching the names with
//!   the hash and suffix as wildcards, in list order: in any other build (another feature
//!   set, the `dist` profile, an edited crate) that is where the functions that run end
//!   up, together with the instantiations of a generic function that did not run; a
//!   looser packing, never a wrong one.
//!
//! A name that no longer exists matches nothing. The linker flags are passed only in an
//! optimised build where the linker is known to be LLD (rustc's default on
//! x86_64-unknown-linux-gnu since 1.90) and no other linker is configured;
//! `NACELLE_LINK_ORDER=off` turns them off.

#[path = "build/link_order.rs"]
mod link_order;

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=NACELLE_LINK_ORDER");
    let Some(dir) = env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let list = PathBuf::from(dir).join("link-order.txt");
    if env::var("NACELLE_LINK_ORDER").is_ok_and(|v| v == "off") || !list.is_file() {
        return;
    }
    // A debug build runs nothing whose memory is measured; its names differ anyway.
    if env::var("OPT_LEVEL").is_ok_and(|v| v == "0") || !default_linker_is_lld() {
        return;
    }
    let (Ok(list), Some(out_dir)) = (fs::read_to_string(&list), env::var_os("OUT_DIR")) else {
        return;
    };
    let names = link_order::names(&list);
    let out_dir = PathBuf::from(out_dir);
    let script = out_dir.join("link-order.ld");
    let order = out_dir.join("link-order.sym");
    let written = fs::write(&script, link_order::linker_script(&names))
        .and_then(|()| fs::write(&order, link_order::ordering_file(&names)));
    if written.is_err() {
        return;
    }
    let (Some(script), Some(order)) = (script.to_str(), order.to_str()) else {
        return;
    };
    println!("cargo:rustc-link-arg-bin=nacelle=-Wl,-T,{script}");
    println!("cargo:rustc-link-arg-bin=nacelle=-Wl,--symbol-ordering-file={order}");
    println!("cargo:rustc-link-arg-bin=nacelle=-Wl,--no-warn-symbol-ordering");
}

/// Whether this build links with rustc's bundled LLD: the target is x86_64 Linux (GNU), the
/// compiler is 1.90 or newer, and neither a configured linker nor linker flags say
/// otherwise.
fn default_linker_is_lld() -> bool {
    if env::var("TARGET").ok().as_deref() != Some("x86_64-unknown-linux-gnu") {
        return false;
    }
    if env::var_os("RUSTC_LINKER").is_some() {
        return false;
    }
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if ["linker", "fuse-ld", "link-self-contained"]
        .iter()
        .any(|f| flags.contains(f))
    {
        return false;
    }
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    link_order::minor_version(&String::from_utf8_lossy(&out.stdout))
        .is_some_and(|minor| minor >= 90)
}
