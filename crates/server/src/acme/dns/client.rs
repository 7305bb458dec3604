//! One DNS exchange with the zone's server: UDP with a timeout and retries, TCP (each
//! message after its 2-byte length, RFC 1035 §4.2.2) when the answer comes truncated or
//! when the config says so.
//!
//! Runs on the ACME thread's tokio runtime, never on a worker. Only an answer with the
//! request's ID and QR set is taken (a connected UDP socket takes datagrams from the server's
//! address only); every wait is bounded.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::message::{self, MAX_MESSAGE};

/// How long one UDP try waits for its answer.
pub const UDP_TIMEOUT: Duration = Duration::from_secs(2);
/// How many times a UDP request is sent before the exchange fails.
pub const UDP_TRIES: u32 = 3;
/// How long a TCP exchange may take, connecting included.
pub const TCP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why no answer came.
#[derive(Debug)]
pub enum TransportError {
    /// A socket call failed (the server refused, no route …).
    Io(std::io::Error),
    /// No answer within the tries and timeouts.
    Timeout,
    /// The request is longer than a DNS message may be.
    Long,
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::Io(e) => write!(f, "{e}"),
            TransportError::Timeout => write!(
                f,
                "no answer ({UDP_TRIES} tries of {UDP_TIMEOUT:?} over UDP, or {TCP_TIMEOUT:?} over TCP)"
            ),
            TransportError::Long => f.write_str("a request longer than a DNS message"),
        }
    }
}

impl std::error::Error for TransportError {}

impl From<std::io::Error> for TransportError {
    fn from(e: std::io::Error) -> TransportError {
        TransportError::Io(e)
    }
}

/// Whether `answer` answers `request`: the same ID, QR set.
fn answers(request: &[u8], answer: &[u8]) -> bool {
    match (
        message::parse_header(request),
        message::parse_header(answer),
    ) {
        (Ok(q), Ok(a)) => a.answer && a.id == q.id,
        _ => false,
    }
}

/// Sends `request` to `server` and returns its answer: over TCP when `tcp`, else over UDP
/// and again over TCP when the UDP answer is truncated.
pub async fn exchange(
    server: SocketAddr,
    request: &[u8],
    tcp: bool,
) -> Result<Vec<u8>, TransportError> {
    if request.len() > MAX_MESSAGE {
        return Err(TransportError::Long);
    }
    if !tcp {
        let answer = udp(server, request).await?;
        if !message::parse_header(&answer).is_ok_and(|h| h.truncated) {
            return Ok(answer);
        }
        tracing::debug!(%server, "DNS answer truncated over UDP: asking again over TCP");
    }
    tokio::time::timeout(TCP_TIMEOUT, over_tcp(server, request))
        .await
        .map_err(|_| TransportError::Timeout)?
}

async fn udp(server: SocketAddr, request: &[u8]) -> Result<Vec<u8>, TransportError> {
    let local: SocketAddr = if server.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = tokio::net::UdpSocket::bind(local).await?;
    socket.connect(server).await?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    for _ in 0..UDP_TRIES {
        socket.send(request).await?;
        let deadline = tokio::time::Instant::now() + UDP_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await {
                Err(_) => break,
                Ok(Err(e)) => return Err(e.into()),
                // A late answer to another try has this ID too: any of them will do.
                Ok(Ok(n)) if answers(request, &buf[..n]) => return Ok(buf[..n].to_vec()),
                Ok(Ok(_)) => continue,
            }
        }
    }
    Err(TransportError::Timeout)
}

async fn over_tcp(server: SocketAddr, request: &[u8]) -> Result<Vec<u8>, TransportError> {
    let mut stream = tokio::net::TcpStream::connect(server).await?;
    let mut framed = (request.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(request);
    stream.write_all(&framed).await?;
    loop {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut answer).await?;
        if answers(request, &answer) {
            return Ok(answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A UDP server that drops the first datagram, answers the second with another ID, then
    /// truncated with the right one; and a TCP server on the same port answering whole.
    #[test]
    fn a_lost_datagram_is_sent_again_and_a_truncated_answer_asked_again_over_tcp() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = udp.local_addr().unwrap();
        let tcp = std::net::TcpListener::bind(addr).unwrap();
        let request = message::query_txt(0x4242, "a.test").unwrap();
        let udp_side = std::thread::spawn(move || {
            udp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut buf = [0u8; 512];
            let (_, _) = udp.recv_from(&mut buf).unwrap(); // dropped
            let (n, from) = udp.recv_from(&mut buf).unwrap();
            let mut answer = buf[..n].to_vec();
            answer[2] |= 0x80;
            answer[0] ^= 1;
            udp.send_to(&answer, from).unwrap(); // another ID: ignored
            answer[0] ^= 1;
            answer[2] |= 0x02;
            udp.send_to(&answer, from).unwrap();
        });
        let tcp_side = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut s, _) = tcp.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut len = [0u8; 2];
            s.read_exact(&mut len).unwrap();
            let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut m).unwrap();
            m[2] |= 0x80;
            m[3] = 5; // REFUSED: what tells this answer from the UDP one
            s.write_all(&(m.len() as u16).to_be_bytes()).unwrap();
            s.write_all(&m).unwrap();
        });
        let got = runtime().block_on(exchange(addr, &request, false)).unwrap();
        let h = message::parse_header(&got).unwrap();
        assert_eq!(
            (h.id, h.answer, h.truncated, h.rcode),
            (0x4242, true, false, 5)
        );
        udp_side.join().unwrap();
        tcp_side.join().unwrap();
    }

    #[test]
    fn no_answer_is_a_timeout_after_the_tries() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let request = message::query_txt(1, "a.test").unwrap();
        let got = runtime().block_on(udp(silent.local_addr().unwrap(), &request));
        assert!(matches!(got, Err(TransportError::Timeout)), "{got:?}");
        let mut buf = [0u8; 512];
        silent.set_nonblocking(true).unwrap();
        let mut sent = 0;
        while silent.recv(&mut buf).is_ok() {
            sent += 1;
        }
        assert_eq!(sent, UDP_TRIES);
    }
}
