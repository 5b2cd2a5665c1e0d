//! What `build.rs` writes for the linker, from the list in `link-order.txt`: kept apart
//! from the build script's environment handling so that `tests/link_order.rs` can link a
//! program with the very script a release build of the server gets.

use std::collections::HashSet;

/// The list's symbol names, in order: comments, blank lines and any line the linker script
/// could not carry as it is are left out.
pub fn names(list: &str) -> Vec<&str> {
    list.lines()
        .map(str::trim)
        .filter(|n| !n.is_empty() && !n.starts_with('#') && is_symbol(n))
        .collect()
}

/// The `--symbol-ordering-file` of `names`: one per line.
pub fn ordering_file(names: &[&str]) -> String {
    let mut file = names.join("\n");
    file.push('\n');
    file
}

/// A linker script of two output sections around the default layout's `.text`: before it,
/// the sections of the listed names in list order; after it, the sections that match the
/// names with the hash as a wildcard, in list order. `INSERT` keeps the default layout
/// for everything else, and a section nothing references is still garbage-collected.
pub fn linker_script(names: &[&str]) -> String {
    let mut script = String::from("SECTIONS {\n  .text.nacelle_run : {\n");
    let mut placed = HashSet::new();
    for name in names {
        if placed.insert((*name).to_owned()) {
            push_rule(&mut script, name);
        }
    }
    script.push_str("  }\n}\nINSERT BEFORE .text;\nSECTIONS {\n  .text.nacelle_like : {\n");
    for name in names {
        let pattern = without_hash(name);
        if placed.insert(pattern.clone()) {
            push_rule(&mut script, &pattern);
        }
    }
    script.push_str("  }\n}\nINSERT AFTER .text;\n");
    script
}

/// One input-section rule: the function's section, plain or in LLVM's `.text.unlikely.`
/// group of cold functions.
fn push_rule(script: &mut String, name: &str) {
    script.push_str("    *(.text.");
    script.push_str(name);
    script.push_str(" .text.unlikely.");
    script.push_str(name);
    script.push_str(")\n");
}

/// Whether a list line is a symbol name the linker script can carry as it is: mangled
/// names use letters, digits, `_`, `$` and `.` only.
pub fn is_symbol(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'))
}

/// `name` with its build-specific parts as wildcards: the legacy mangling's trailing hash
/// (`…17h0123456789abcdefE` becomes `…17h*`, which also covers a ThinLTO `.llvm.N`
/// suffix after it) or, without one, a ThinLTO suffix alone (`….llvm.N` becomes
/// `….llvm.*`).
pub fn without_hash(name: &str) -> String {
    let (base, llvm) = match name.find(".llvm.") {
        Some(i) if name[i + 6..].bytes().all(|b| b.is_ascii_digit()) => (&name[..i], true),
        _ => (name, false),
    };
    let hashed = base.is_ascii()
        && base.len() > 20
        && base.ends_with('E')
        && base[base.len() - 20..base.len() - 17] == *"17h"
        && base[base.len() - 17..base.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_hexdigit());
    if hashed {
        format!("{}17h*", &base[..base.len() - 20])
    } else if llvm {
        format!("{base}.llvm.*")
    } else {
        name.to_owned()
    }
}

/// The minor version of `rustc 1.MINOR.PATCH …`.
pub fn minor_version(version: &str) -> Option<u32> {
    let number = version.split_whitespace().nth(1)?;
    let mut parts = number.split('.');
    if parts.next()? != "1" {
        return None;
    }
    parts.next()?.parse().ok()
}
