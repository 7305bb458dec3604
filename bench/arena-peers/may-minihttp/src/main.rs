//! `may-minihttp-arena`: HttpArena's `frameworks/may-minihttp` entry, written again for
//! linerate's arena (`linerate lab arena`).
//!
//! Settings followed (HttpArena repository paths):
//! - `frameworks/may-minihttp/Cargo.toml`: the `may` 0.3 coroutine runtime used directly (not
//!   the `may_minihttp` crate), `httparse` 1, `mimalloc` as the global allocator; release
//!   profile opt-level 3, codegen-units 1, thin LTO, panic = abort.
//! - `frameworks/may-minihttp/src/main.rs`: `may::config().set_workers(num_cpus)`, one
//!   coroutine per accepted connection, a 4096-byte read buffer doubled whenever it is full,
//!   at most 16 headers per request, one `write_all` per request (no batching of the answers
//!   to a pipelined burst), POST bodies read with Content-Length or chunked coding.
//! - Routes: `GET /pipeline` → `ok`; `GET|POST /baseline11` → the sum of the query values plus
//!   the body's integer (HttpArena's baseline contract); anything else → 404.
//!
//! Command line (the arena's peer contract): `--h1 ADDR` is served; `--workers N` sets the
//! worker count (default: the CPUs of the affinity mask); `--tls --cert --key --h2c --static
//! --dataset --database-url` are accepted and ignored.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{self, Cursor, Read, Write};
use std::net::SocketAddr;
use std::process::ExitCode;

use may::go;
use may::net::{TcpListener, TcpStream};

/// First read buffer size; doubled while a request does not fit.
const BUF_SIZE: usize = 4096;
/// Headers httparse accepts per request.
const MAX_HEADERS: usize = 16;
/// Largest request (head and body) held in the buffer before the connection is refused.
const MAX_REQUEST: usize = 1 << 20;

/// Flags of the arena's peer command line that take a value and are not used here.
const IGNORED: [&str; 7] = [
    "--tls",
    "--cert",
    "--key",
    "--h2c",
    "--static",
    "--dataset",
    "--database-url",
];

struct Args {
    h1: SocketAddr,
    workers: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut h1 = None;
    let mut workers = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (arg, None),
        };
        if flag != "--h1" && flag != "--workers" && !IGNORED.contains(&flag.as_str()) {
            return Err(format!("unknown flag {flag}"));
        }
        let value = inline
            .or_else(|| it.next())
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--h1" => {
                h1 = Some(value.parse().map_err(|e| format!("--h1 {value}: {e}"))?);
            }
            "--workers" => match value.parse::<usize>() {
                Ok(n) if n > 0 => workers = Some(n),
                _ => return Err(format!("--workers {value}: expected a positive integer")),
            },
            _ => {}
        }
    }
    Ok(Args {
        h1: h1.ok_or("--h1 ADDR is required")?,
        workers: workers.unwrap_or_else(num_cpus::get),
    })
}

/// What one pass over the buffered bytes found.
enum Step {
    /// A whole request was answered into `out`; it took `used` bytes.
    Answered { used: usize, close: bool },
    /// The request is not complete yet.
    NeedMore,
    /// The request cannot be served: answer with this status and close.
    Refuse(&'static str),
}

/// Decodes a chunked body at the start of `data` into `body`; `Ok(Some(n))` when complete,
/// `n` being the bytes it took (trailers included).
fn dechunk(data: &[u8], body: &mut Vec<u8>) -> Result<Option<usize>, &'static str> {
    const BAD: &str = "400 Bad Request";
    body.clear();
    let mut rest = data;
    loop {
        let (n, size) = match httparse::parse_chunk_size(rest) {
            Ok(httparse::Status::Complete(found)) => found,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(BAD),
        };
        rest = &rest[n..];
        if size == 0 {
            // Trailer lines, then the empty line that ends the body.
            loop {
                match rest.windows(2).position(|w| w == b"\r\n") {
                    None => return Ok(None),
                    Some(0) => return Ok(Some(data.len() - rest.len() + 2)),
                    Some(i) => rest = &rest[i + 2..],
                }
            }
        }
        let size = match usize::try_from(size) {
            Ok(s) if s <= MAX_REQUEST => s,
            _ => return Err("413 Payload Too Large"),
        };
        if rest.len() < size + 2 {
            return Ok(None);
        }
        if &rest[size..size + 2] != b"\r\n" {
            return Err(BAD);
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Sum of every integer query value plus the body's integer (unparsable parts count 0).
fn baseline_sum(query: &[u8], body: &[u8]) -> i64 {
    let int = |b: &[u8]| {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(0)
    };
    let params: i64 = query
        .split(|&b| b == b'&')
        .filter_map(|pair| {
            pair.iter()
                .position(|&b| b == b'=')
                .map(|i| int(&pair[i + 1..]))
        })
        .fold(0, i64::wrapping_add);
    params.wrapping_add(int(body))
}

fn respond(out: &mut Vec<u8>, status: &str, body: &[u8]) {
    out.clear();
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    out.extend_from_slice(body);
}

/// Parses one request at the start of `data` and, when it is whole, answers it into `out`.
fn step(data: &[u8], body: &mut Vec<u8>, out: &mut Vec<u8>) -> Step {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Step::NeedMore,
        Err(httparse::Error::TooManyHeaders) => {
            return Step::Refuse("431 Request Header Fields Too Large")
        }
        Err(_) => return Step::Refuse("400 Bad Request"),
    };

    let mut length = 0usize;
    let mut chunked = false;
    let mut close = req.version == Some(0);
    for h in req.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("");
        if h.name.eq_ignore_ascii_case("content-length") {
            match value.trim().parse() {
                Ok(n) if n <= MAX_REQUEST => length = n,
                Ok(_) => return Step::Refuse("413 Payload Too Large"),
                Err(_) => return Step::Refuse("400 Bad Request"),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    close = false;
                }
            }
        }
    }

    let used = if chunked {
        match dechunk(&data[head..], body) {
            Ok(Some(n)) => head + n,
            Ok(None) => return Step::NeedMore,
            Err(status) => return Step::Refuse(status),
        }
    } else {
        if data.len() - head < length {
            return Step::NeedMore;
        }
        body.clear();
        body.extend_from_slice(&data[head..head + length]);
        head + length
    };

    let target = req.path.unwrap_or("/").as_bytes();
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(i) => (&target[..i], &target[i + 1..]),
        None => (target, &b""[..]),
    };
    match (req.method.unwrap_or(""), path) {
        ("GET", b"/pipeline") => respond(out, "200 OK", b"ok"),
        ("GET" | "POST", b"/baseline11") => {
            let mut num = [0u8; 24];
            let mut cur = Cursor::new(&mut num[..]);
            // 24 bytes hold any i64.
            let _ = write!(cur, "{}", baseline_sum(query, body));
            let n = cur.position() as usize;
            respond(out, "200 OK", &num[..n]);
        }
        _ => respond(out, "404 Not Found", b"not found"),
    }
    Step::Answered { used, close }
}

/// One connection, served by its own coroutine: read, answer every whole request in the
/// buffer (one write each), keep the rest for the next read.
fn serve(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; BUF_SIZE];
    let mut body = Vec::new();
    let mut out = Vec::with_capacity(256);
    let (mut start, mut filled) = (0, 0);
    loop {
        while start < filled {
            match step(&buf[start..filled], &mut body, &mut out) {
                Step::Answered { used, close } => {
                    stream.write_all(&out)?;
                    start += used;
                    if close {
                        return Ok(());
                    }
                }
                Step::NeedMore => break,
                Step::Refuse(status) => {
                    respond(&mut out, status, b"");
                    return stream.write_all(&out);
                }
            }
        }
        if start > 0 {
            buf.copy_within(start..filled, 0);
            filled -= start;
            start = 0;
        }
        if filled == buf.len() {
            if buf.len() >= MAX_REQUEST {
                respond(&mut out, "413 Payload Too Large", b"");
                return stream.write_all(&out);
            }
            buf.resize(buf.len() * 2, 0);
        }
        let n = stream.read(&mut buf[filled..])?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(why) => {
            eprintln!("may-minihttp-arena: {why}");
            return ExitCode::from(2);
        }
    };
    may::config().set_workers(args.workers);

    let listener = match TcpListener::bind(args.h1) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("may-minihttp-arena: bind {}: {e}", args.h1);
            return ExitCode::FAILURE;
        }
    };
    // A failed accept (e.g. out of descriptors) drops that one connection, not the server.
    for stream in listener.incoming().flatten() {
        go!(move || {
            let _ = serve(stream);
        });
    }
    ExitCode::SUCCESS
}
