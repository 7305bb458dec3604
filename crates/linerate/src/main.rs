//! The `linerate` binary: CLI parsing and wiring only (clap). `serve` is the default command.
//! Every user mistake ends as one line on stderr and a non-zero exit.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    let parsed = linerate::cli::Cli::command()
        .try_get_matches()
        .and_then(|m| linerate::cli::Cli::from_arg_matches(&m).map(|c| (c, m)));
    let cli = match parsed {
        Ok((mut cli, matches)) => {
            // `serve` flags given on the command line override a --config file.
            cli.note_explicit(&matches);
            cli
        }
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            eprintln!("linerate: {}", linerate::cli::error_line(&e));
            return ExitCode::from(2);
        }
    };
    match linerate::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            // One line: the error and its causes, joined.
            eprintln!("linerate: {e:#}");
            ExitCode::FAILURE
        }
    }
}
