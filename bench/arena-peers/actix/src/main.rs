//! `actix-arena`: the arena's actix-web peer, HttpArena's three actix entries in one binary.
//!
//! Follows, in MDA2AV/HttpArena: `frameworks/actix/src/main.rs` and `Cargo.toml` (actix-web 4
//! with rustls 0.23, `Compress::default()` on the App, a 25 MiB payload limit, actix-files from
//! disk, deadpool-postgres sized from `DATABASE_MAX_CONN` with `RecyclingMethod::Fast` and cached
//! prepared statements, `.workers(cpu count)`, a `Server: actix` header);
//! `frameworks/actix-h2c/src/main.rs` (`bind_auto_h2c` with a middleware answering HTTP/1.x on
//! that port with 400, so it serves prior-knowledge h2c only); and
//! `frameworks/actix-websocket/src/main.rs` (actix-ws echo on `/ws`). The newer actix entry's
//! routes are here too: `POST /echo`, the crud cache-aside with `X-Cache`, TLS offering
//! h2 and http/1.1, and `Files::try_compressed()` for the `.br`/`.gz` siblings. Beyond every
//! entry: `/delay/{ms}` and `/fortunes`, for the arena's `async` and `fortunes` profiles,
//! which no HttpArena entry enters (actix enters them as the arena's choice), with
//! `max_connections` and `backlog` raised for async's 32,000 connections.
//!
//! Command line (the arena's, the same for every peer):
//! `actix-arena --h1 ADDR [--tls ADDR --cert PEM --key PEM] [--h2c ADDR] [--static DIR]
//! [--dataset FILE] [--database-url URL] [--workers N]`.

mod db;
mod routes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::{io, process};

use actix_files::Files;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::Version;
use actix_web::middleware::Compress;
use actix_web::{web, App, HttpResponse, HttpServer};
use futures_util::future::{ready, Either};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// HttpArena's actix entry: `PayloadConfig::new(25 * 1024 * 1024)`.
const PAYLOAD_LIMIT: usize = 25 * 1024 * 1024;
/// Connections one worker holds before it stops accepting (actix's default is 25,000): the
/// arena's `async` profile opens 32,000, all of which may land on one worker. No other
/// profile opens more than 16,384, so this changes nothing for the entry's profiles.
const MAX_CONNECTIONS_PER_WORKER: usize = 65_536;
/// Listen backlog (actix's default is 2,048): linerate's own (`BACKLOG`, 4,096), so both
/// take the async profile's 32,000 connects through the same kernel queue.
const BACKLOG: u32 = 4096;

/// The parsed command line.
#[derive(Default)]
struct Args {
    h1: Option<SocketAddr>,
    tls: Option<SocketAddr>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    h2c: Option<SocketAddr>,
    static_dir: Option<PathBuf>,
    dataset: Option<PathBuf>,
    database_url: Option<String>,
    workers: Option<usize>,
}

impl Args {
    fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut a = Args::default();
        while let Some(arg) = argv.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg, None),
            };
            let value = match inline.or_else(|| argv.next()) {
                Some(v) => v,
                None => return Err(format!("{flag} needs a value")),
            };
            let addr = |v: &str| {
                v.parse::<SocketAddr>()
                    .map_err(|e| format!("{flag} {v}: {e}"))
            };
            match flag.as_str() {
                "--h1" => a.h1 = Some(addr(&value)?),
                "--tls" => a.tls = Some(addr(&value)?),
                "--h2c" => a.h2c = Some(addr(&value)?),
                "--cert" => a.cert = Some(value.into()),
                "--key" => a.key = Some(value.into()),
                "--static" => a.static_dir = Some(value.into()),
                "--dataset" => a.dataset = Some(value.into()),
                "--database-url" => a.database_url = Some(value),
                "--workers" => match value.parse::<usize>() {
                    Ok(n) if n > 0 => a.workers = Some(n),
                    _ => return Err(format!("--workers {value}: not a positive integer")),
                },
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        if a.h1.is_none() && a.tls.is_none() && a.h2c.is_none() {
            return Err("no listener: give --h1, --tls or --h2c".into());
        }
        if a.tls.is_some() && (a.cert.is_none() || a.key.is_none()) {
            return Err("--tls needs --cert and --key".into());
        }
        Ok(a)
    }
}

/// rustls with the given certificate chain and key; actix-web puts h2 and http/1.1 in front
/// of the ALPN list itself (HttpArena's newer entry offers both).
fn tls_config(cert: &PathBuf, key: &PathBuf) -> Result<rustls::ServerConfig, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS: {e}"))
}

fn fail(why: impl std::fmt::Display) -> ! {
    eprintln!("actix-arena: {why}");
    process::exit(2);
}

#[actix_web::main]
async fn main() -> io::Result<()> {
    let args = Args::parse(std::env::args().skip(1)).unwrap_or_else(|e| fail(e));
    // HttpArena's entry: the cgroup CPU quota, else num_cpus; `available_parallelism` reads the
    // quota and the affinity mask both.
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let dataset = web::Data::new(match &args.dataset {
        Some(path) => routes::load_dataset(path).unwrap_or_else(|e| fail(e)),
        None => Vec::new(),
    });
    let database = args
        .database_url
        .as_deref()
        .map(|url| web::Data::new(db::Db::new(url, workers).unwrap_or_else(|e| fail(e))));
    let tls = match (&args.tls, &args.cert, &args.key) {
        (Some(_), Some(cert), Some(key)) => Some(tls_config(cert, key).unwrap_or_else(|e| fail(e))),
        _ => None,
    };
    let static_dir = args.static_dir.clone();
    let h2c = args.h2c;

    let mut server = HttpServer::new(move || {
        let mut app = App::new()
            // actix-h2c's guard: its port answers HTTP/1.x with 400 (prior-knowledge h2c only).
            .wrap_fn(move |req, srv| {
                let on_h2c = h2c == Some(req.app_config().local_addr());
                if on_h2c && req.version() < Version::HTTP_2 {
                    let (req, _) = req.into_parts();
                    let resp = HttpResponse::BadRequest()
                        .content_type("text/plain")
                        .body("HTTP/2 cleartext prior-knowledge required");
                    Either::Left(ready(Ok(ServiceResponse::new(req, resp))))
                } else {
                    Either::Right(srv.call(req))
                }
            })
            .wrap(Compress::default())
            .app_data(web::PayloadConfig::new(PAYLOAD_LIMIT))
            .app_data(dataset.clone())
            .route("/pipeline", web::get().to(routes::pipeline))
            .route("/baseline11", web::get().to(routes::baseline_get))
            .route("/baseline11", web::post().to(routes::baseline_post))
            .route("/baseline2", web::get().to(routes::baseline_get))
            .route("/json/{count}", web::get().to(routes::json))
            .route("/upload", web::post().to(routes::upload))
            .route("/echo", web::post().to(routes::echo))
            .route("/delay/{ms}", web::get().to(routes::delay))
            .route("/ws", web::get().to(routes::ws));
        if let Some(db) = &database {
            app = app
                .app_data(db.clone())
                .route("/async-db", web::get().to(db::async_db))
                .route("/crud/items", web::get().to(db::list))
                .route("/crud/items", web::post().to(db::create))
                .route("/crud/items/{id}", web::get().to(db::read))
                .route("/crud/items/{id}", web::put().to(db::update))
                .route("/fortunes", web::get().to(db::fortunes));
        }
        if let Some(dir) = &static_dir {
            app = app.service(Files::new("/static", dir).try_compressed());
        }
        app
    })
    .workers(workers)
    .max_connections(MAX_CONNECTIONS_PER_WORKER)
    .backlog(BACKLOG);

    let bound =
        |what: &str, addr: SocketAddr, e: io::Error| -> ! { fail(format!("{what} {addr}: {e}")) };
    if let Some(addr) = args.h1 {
        server = server.bind(addr).unwrap_or_else(|e| bound("--h1", addr, e));
    }
    if let (Some(addr), Some(config)) = (args.tls, tls) {
        server = server
            .bind_rustls_0_23(addr, config)
            .unwrap_or_else(|e| bound("--tls", addr, e));
    }
    if let Some(addr) = args.h2c {
        server = server
            .bind_auto_h2c(addr)
            .unwrap_or_else(|e| bound("--h2c", addr, e));
    }
    server.run().await
}
