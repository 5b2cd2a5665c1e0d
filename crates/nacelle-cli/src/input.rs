//! Where a command's content comes from: the file an argument names, or stdin when the
//! argument is `-` or not given.

use std::io::Read;
use std::path::Path;

use crate::error::{CliError, Result};

/// The file a content argument names: `None` when it means stdin (`-`, or no argument).
pub(crate) fn named_file(arg: Option<&Path>) -> Option<&Path> {
    arg.filter(|p| p.as_os_str() != "-")
}

/// The text of a content argument: the named file's, else all of stdin.
pub(crate) fn read_content(arg: Option<&Path>) -> Result<String> {
    match named_file(arg) {
        Some(p) => {
            std::fs::read_to_string(p).map_err(CliError::io(format!("reading {}", p.display())))
        }
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(CliError::io("reading stdin"))?;
            Ok(s)
        }
    }
}
