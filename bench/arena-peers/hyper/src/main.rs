//! `hyper-arena`: a peer for linerate's `lab arena`, written on hyper 1 the way HttpArena's
//! `frameworks/hyper` entry is configured (MDA2AV/HttpArena `frameworks/hyper/src/main.rs`,
//! `Cargo.toml`, `meta.json`):
//!
//! - thread per core: `--workers` OS threads (default `num_cpus::get()`, which counts the CPUs
//!   in the affinity mask), each running a `current_thread` tokio runtime with a `LocalSet`;
//! - every thread owns its own `SO_REUSEPORT` listener per port (socket2: reuseport, reuseaddr,
//!   nodelay, backlog 4096), so the kernel spreads connections over the threads;
//! - HTTP/1.1 on `--h1`: `http1::Builder` with `pipeline_flush(true)`, otherwise defaults;
//! - `--tls`: HTTP/2 over tokio-rustls (ring provider, ALPN `h2` only), `http2::Builder` and
//!   `ServerConfig` defaults;
//! - routes: `GET /pipeline`, `/baseline11` (GET, POST with a Content-Length or chunked body),
//!   `/baseline2`, `/static/{name}`.
//!
//! One difference from the entry: static files are read from `--static` on every request
//! (HttpArena's newer static rules forbid in-memory bodies); the entry preloads them.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::{io, thread};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue, SERVER};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;
use tokio::task::{LocalSet, spawn_local};
use tokio_rustls::TlsAcceptor;

const USAGE: &str = "usage: hyper-arena --h1 ADDR [--tls ADDR --cert PEM --key PEM] [--h2c ADDR] \
                     [--static DIR] [--dataset FILE] [--database-url URL] [--workers N]";

static SERVER_NAME: HeaderValue = HeaderValue::from_static("hyper");
static TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain");

/// The command line shared by every arena peer; flags this peer has no use for
/// (`--h2c`, `--dataset`, `--database-url`) are accepted and ignored.
struct Args {
    h1: SocketAddr,
    tls: Option<(SocketAddr, PathBuf, PathBuf)>,
    static_dir: Option<PathBuf>,
    workers: usize,
}

impl Args {
    fn parse(mut argv: impl Iterator<Item = String>) -> Result<Self, String> {
        let (mut h1, mut tls, mut cert, mut key, mut static_dir, mut workers) =
            (None, None, None, None, None, None);
        while let Some(flag) = argv.next() {
            let value = argv.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let addr = |v: &str| {
                v.parse::<SocketAddr>()
                    .map_err(|e| format!("{flag} {v}: {e}"))
            };
            match flag.as_str() {
                "--h1" => h1 = Some(addr(&value)?),
                "--tls" => tls = Some(addr(&value)?),
                "--cert" => cert = Some(PathBuf::from(value)),
                "--key" => key = Some(PathBuf::from(value)),
                "--static" => static_dir = Some(PathBuf::from(value)),
                "--workers" => match value.parse::<usize>() {
                    Ok(n) if n > 0 => workers = Some(n),
                    _ => return Err(format!("--workers {value}: expected a positive integer")),
                },
                "--h2c" | "--dataset" | "--database-url" => {}
                _ => return Err(format!("unknown flag {flag}; {USAGE}")),
            }
        }
        let tls = match (tls, cert, key) {
            (None, _, _) => None,
            (Some(a), Some(c), Some(k)) => Some((a, c, k)),
            _ => return Err("--tls needs --cert and --key".into()),
        };
        Ok(Args {
            h1: h1.ok_or_else(|| format!("--h1 is required; {USAGE}"))?,
            tls,
            static_dir,
            workers: workers.unwrap_or_else(num_cpus::get),
        })
    }
}

fn main() -> ExitCode {
    let result = Args::parse(std::env::args().skip(1)).and_then(run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("hyper-arena: {why}");
            ExitCode::from(2)
        }
    }
}

/// Binds every worker's listeners up front (so a bad address fails the process at once), then
/// runs one thread per worker and waits on them.
fn run(args: Args) -> Result<(), String> {
    let tls = match &args.tls {
        Some((addr, cert, key)) => Some((*addr, tls_config(cert, key)?)),
        None => None,
    };
    let statics = args.static_dir.map(Arc::new);
    let mut threads = Vec::with_capacity(args.workers);
    for i in 0..args.workers {
        let h1 = listen(args.h1).map_err(|e| format!("--h1 {}: {e}", args.h1))?;
        let h2 = match &tls {
            Some((addr, cfg)) => {
                let l = listen(*addr).map_err(|e| format!("--tls {addr}: {e}"))?;
                Some((l, TlsAcceptor::from(cfg.clone())))
            }
            None => None,
        };
        let statics = statics.clone();
        let worker = thread::Builder::new()
            .name(format!("hyper-arena-{i}"))
            .spawn(move || worker(h1, h2, statics))
            .map_err(|e| format!("spawn worker: {e}"))?;
        threads.push(worker);
    }
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("worker: {e}")),
            Err(_) => return Err("worker panicked".into()),
        }
    }
    Ok(())
}

/// A non-blocking listener as the entry makes it: SO_REUSEPORT + SO_REUSEADDR, TCP_NODELAY
/// (inherited by accepted sockets on Linux), backlog 4096.
fn listen(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_port(true)?;
    socket.set_reuse_address(true)?;
    socket.set_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}

/// rustls defaults (ring provider, TLS 1.2 and 1.3), no client auth, ALPN `h2` only.
fn tls_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("--cert {}: {e}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--key {}: {e}", key.display()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// One worker: a current_thread runtime with a LocalSet serving this thread's listeners.
fn worker(
    h1: std::net::TcpListener,
    h2: Option<(std::net::TcpListener, TlsAcceptor)>,
    statics: Option<Arc<PathBuf>>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    LocalSet::new().block_on(&rt, async move {
        if let Some((listener, acceptor)) = h2 {
            let listener = TcpListener::from_std(listener)?;
            spawn_local(serve_h2(listener, acceptor, statics.clone()));
        }
        serve_h1(TcpListener::from_std(h1)?, statics).await;
        Ok(())
    })
}

async fn serve_h1(listener: TcpListener, statics: Option<Arc<PathBuf>>) {
    let mut http = http1::Builder::new();
    http.pipeline_flush(true);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let statics = statics.clone();
        let conn = http.serve_connection(
            TokioIo::new(stream),
            service_fn(move |req| handle(req, statics.clone())),
        );
        spawn_local(async move {
            let _ = conn.await;
        });
    }
}

async fn serve_h2(listener: TcpListener, acceptor: TlsAcceptor, statics: Option<Arc<PathBuf>>) {
    let http = http2::Builder::new(TokioExecutor::new());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, http, statics) = (acceptor.clone(), http.clone(), statics.clone());
        spawn_local(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let svc = service_fn(move |req| handle(req, statics.clone()));
            let _ = http.serve_connection(TokioIo::new(tls), svc).await;
        });
    }
}

async fn handle(
    req: Request<Incoming>,
    statics: Option<Arc<PathBuf>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    Ok(match path {
        "/pipeline" => text(Bytes::from_static(b"ok")),
        "/baseline2" => text(query_sum(req.uri().query()).to_string().into()),
        "/baseline11" if req.method() == Method::POST => {
            let sum = query_sum(req.uri().query());
            match req.into_body().collect().await {
                Ok(body) => text((sum + body_int(&body.to_bytes())).to_string().into()),
                Err(_) => status(StatusCode::BAD_REQUEST),
            }
        }
        "/baseline11" => text(query_sum(req.uri().query()).to_string().into()),
        _ => match (path.strip_prefix("/static/"), statics) {
            (Some(name), Some(dir)) => static_file(&dir, name).await,
            _ => status(StatusCode::NOT_FOUND),
        },
    })
}

/// The sum of every integer query value (`a=13&b=42` → 55).
fn query_sum(query: Option<&str>) -> i64 {
    query
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.split_once('=')?.1.parse::<i64>().ok())
        .sum()
}

/// The request body as an integer (surrounding whitespace ignored); 0 if it is not one.
fn body_int(body: &[u8]) -> i64 {
    std::str::from_utf8(body)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Reads `/static/{name}` from the static directory for this request; 404 when the name is not
/// a plain file name or the file cannot be read.
async fn static_file(dir: &Path, name: &str) -> Response<Full<Bytes>> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return status(StatusCode::NOT_FOUND);
    }
    match tokio::fs::read(dir.join(name)).await {
        Ok(data) => {
            let mut res = text(data.into());
            res.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(content_type(name)));
            res
        }
        Err(_) => status(StatusCode::NOT_FOUND),
    }
}

/// The entry's extension → MIME table.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map_or("", |(_, ext)| ext) {
        "css" => "text/css",
        "js" => "application/javascript",
        "html" => "text/html",
        "woff2" => "font/woff2",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
}

/// 200 with `Server: hyper` and `Content-Type: text/plain`, as the entry answers.
fn text(body: Bytes) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(body));
    let headers = res.headers_mut();
    headers.insert(SERVER, SERVER_NAME.clone());
    headers.insert(CONTENT_TYPE, TEXT_PLAIN.clone());
    res
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::new()));
    *res.status_mut() = code;
    res
}
