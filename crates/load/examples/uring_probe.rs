//! Probe: what does one non-pipelined request cost the client with io_uring instead of epoll?
//! A closed loop of N connections, each with one request in flight, driven by io_uring: sends and
//! recvs are SQEs, submitted in one `io_uring_enter` per batch of completions. It counts responses
//! by fixed length, so it only works against a server whose responses all have the same length
//! (`linerate lab floor`). It is a measurement, not a generator: no stats, no errors beyond abort.
//! This file is the only place in the crate with `unsafe` (pushing SQEs that point at buffers).
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, types};

/// Bytes per connection receive buffer.
const RECV_BYTES: usize = 4096;
/// Submission queue entries.
const RING_ENTRIES: u32 = 1024;

fn main() {
    let mut a = std::env::args().skip(1);
    let addr = a
        .next()
        .expect("usage: uring_probe ADDR CONNECTIONS SECONDS [multishot]");
    let conns: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(64);
    let secs: u64 = a.next().and_then(|v| v.parse().ok()).unwrap_or(5);
    let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes();

    // Learn the response length from one exchange.
    let mut probe = TcpStream::connect(&addr).expect("connect");
    probe.write_all(&request).expect("send");
    let mut first = vec![0u8; RECV_BYTES];
    let n = probe.read(&mut first).expect("recv");
    let resp_len = n;

    let socks: Vec<TcpStream> = (0..conns)
        .map(|_| {
            let s = TcpStream::connect(&addr).expect("connect");
            s.set_nodelay(true).expect("nodelay");
            s
        })
        .collect();
    // INVARIANT: `bufs` is allocated once and never resized or dropped while recvs are in flight;
    // the ring is dropped (and with it every pending operation) before `bufs`.
    let mut bufs: Vec<Box<[u8; RECV_BYTES]>> =
        (0..conns).map(|_| Box::new([0u8; RECV_BYTES])).collect();
    let mut pending_bytes = vec![0usize; conns];
    let mut ring = IoUring::new(RING_ENTRIES).expect("io_uring");

    let push_send = |ring: &mut IoUring, i: usize, fd: i32| {
        let e = opcode::Send::new(types::Fd(fd), request.as_ptr(), request.len() as u32)
            .build()
            .user_data((i as u64) << 1);
        // SAFETY: `request` lives until the end of main, after the ring is dropped.
        unsafe { ring.submission().push(&e).expect("sq full") };
    };
    let push_recv = |ring: &mut IoUring, i: usize, fd: i32, buf: &mut [u8; RECV_BYTES]| {
        let e = opcode::Recv::new(types::Fd(fd), buf.as_mut_ptr(), RECV_BYTES as u32)
            .build()
            .user_data(((i as u64) << 1) | 1);
        // SAFETY: see the INVARIANT on `bufs`: the buffer outlives the operation.
        unsafe { ring.submission().push(&e).expect("sq full") };
    };

    for i in 0..conns {
        let fd = socks[i].as_raw_fd();
        push_send(&mut ring, i, fd);
        push_recv(&mut ring, i, fd, &mut bufs[i]);
    }
    let cpu0 = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let start = Instant::now();
    let until = start + Duration::from_secs(secs);
    let mut responses = 0u64;
    let mut enters = 0u64;
    while Instant::now() < until {
        ring.submit_and_wait(1).expect("submit");
        enters += 1;
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (ud, res) in done {
            let i = (ud >> 1) as usize;
            if ud & 1 == 0 {
                assert!(res == request.len() as i32, "short send {res}");
                continue;
            }
            assert!(res > 0, "recv failed or closed: {res}");
            pending_bytes[i] += res as usize;
            let complete = pending_bytes[i] / resp_len;
            pending_bytes[i] %= resp_len;
            responses += complete as u64;
            let fd = socks[i].as_raw_fd();
            for _ in 0..complete {
                push_send(&mut ring, i, fd);
            }
            push_recv(&mut ring, i, fd, &mut bufs[i]);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu1 = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let cpu = (cpu1.tv_sec - cpu0.tv_sec) as f64 + (cpu1.tv_nsec - cpu0.tv_nsec) as f64 / 1e9;
    drop(ring);
    drop(bufs);
    println!(
        "io_uring: {responses} responses in {wall:.2}s = {:.0} req/s; client CPU {:.3} us/request; {:.1} responses per enter",
        responses as f64 / wall,
        cpu * 1e6 / responses as f64,
        responses as f64 / enters as f64
    );
}
