//! The `linerate` binary: CLI parsing and wiring only.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "linerate", version, about = "A fast, strict HTTP/1.1 server, load generator and lab")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the lab tools.
    Lab {
        #[command(subcommand)]
        tool: LabTool,
    },
}

#[derive(Subcommand)]
enum LabTool {
    /// The syscall-floor reference server: one thread, epoll, recv, count request ends,
    /// send that many canned responses in one send.
    Floor(FloorArgs),
}

#[derive(Args)]
struct FloorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Canned response to send.
    #[arg(long, value_enum, default_value_t = FloorBody::Json)]
    response: FloorBody,
    /// Pin the thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FloorBody {
    Json,
    Plaintext,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Lab { tool: LabTool::Floor(a) }) => linerate_lab::floor::run(&linerate_lab::floor::FloorConfig {
            addr: a.addr,
            response: match a.response {
                FloorBody::Json => linerate_lab::floor::FloorResponse::Json,
                FloorBody::Plaintext => linerate_lab::floor::FloorResponse::Plaintext,
            },
            cpu: a.cpu,
        }),
        None => Err(anyhow::anyhow!("serve: not built yet")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("linerate: {e:#}");
            ExitCode::FAILURE
        }
    }
}
