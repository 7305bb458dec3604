//! Try the load generator by hand: `cargo run --release -p linerate-load --example load -- -c 64 -d 5s http://127.0.0.1:8080/`.
#![forbid(unsafe_code)]

use clap::Parser;

#[derive(Parser)]
#[command(name = "load")]
struct Cli {
    #[command(flatten)]
    args: linerate_load::LoadArgs,
}

fn main() -> std::process::ExitCode {
    match linerate_load::run(Cli::parse().args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("linerate: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
