//! `onnx-doctor`: one binary, one verb per step of the PyTorch → ONNX → deployment road.
//!
//! Exit codes (every verb): 0 = clean, 1 = findings at error level, 2 = usage or input error.

mod feed;
mod format;
mod html;
mod input_shape;
mod verbs;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "onnx-doctor",
    version,
    about = "Diagnose, run and fix ONNX models exported from PyTorch"
)]
struct Cli {
    #[command(subcommand)]
    verb: verbs::Verb,
}

fn main() -> ExitCode {
    // Like other command-line tools, stop quietly when the reader of stdout goes away
    // (`onnx-doctor targets --format json | head`) instead of panicking on the broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match verbs::run(cli.verb) {
        Ok(code) => code,
        Err(e) => {
            // One line: the error and its causes, each of which names what failed.
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}
