#!/usr/bin/env python3
"""Hostile HTTP/3 clients for scripts/h3-attacks.sh and scripts/h3-netem.sh, built on aioquic's
sans-I/O QuicConnection and H3Connection, each connection pumped by hand over one UDP socket
(only the relay uses asyncio).

  flood HOST PORT -n N      N client Initials from N separate connections that never finish
                            their handshakes; the replies classified by long-header type
  resets HOST PORT -n N     one connection that opens request streams and cancels them
                            (RESET_STREAM + STOP_SENDING), up to N: --when early cancels
                            each in the packet of its HEADERS, --when read in batches
                            once the server read their HEADERS
  credit HOST PORT -n N     N request streams cancelled (--how early: with their HEADERS;
                            --how body: bodies in flight, once read), then the stream credit
                            (MAX_STREAMS) the server gave back
  bodies HOST PORT          one connection with more request bodies in flight than allowed
  bigfield HOST PORT        a request whose field section is over 64 KiB, then a normal one
                            on the same connection
  upload HOST PORT --upstream-port P
                            a request body through the server's --proxy /up to an upstream
                            this script runs on P, which reads the head and then nothing
                            until the client's credit stops growing (the stream credit the
                            server gave, against the body's size), then reads all of it
  relay LISTEN_PORT HOST PORT --loss P --delay MS --jitter MS --reorder P
                            a UDP relay that drops, delays and reorders datagrams both ways
                            (for h3-netem.sh where the kernel has no netem)

Each prints `key=value` facts on one line per check; the shell scripts assert on them. Every
loop is bounded by a count and a deadline. Exit 0 when the exchange ran (whatever the server
did), 1 when it could not (no handshake, timeout before any answer).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import select
import signal
import socket
import ssl
import sys
import threading
import time

from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, StreamReset

H3_REQUEST_CANCELLED = 0x10C


def config() -> QuicConfiguration:
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    cfg.verify_mode = ssl.CERT_NONE
    cfg.server_name = "localhost"
    return cfg


def request(authority: str, path: str, method: str = "GET",
            extra: list[tuple[bytes, bytes]] | None = None) -> list[tuple[bytes, bytes]]:
    return [
        (b":method", method.encode()),
        (b":scheme", b"https"),
        (b":authority", authority.encode()),
        (b":path", path.encode()),
        (b"user-agent", b"h3attack/aioquic"),
    ] + (extra or [])


class Client:
    """One QUIC + HTTP/3 connection pumped by hand: datagrams out, datagrams and timers in."""

    def __init__(self, host: str, port: int) -> None:
        self.addr = (host, port)
        self.authority = f"{host}:{port}"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.connect(self.addr)
        self.quic = QuicConnection(configuration=config())
        self.h3 = H3Connection(self.quic)
        self.connected = False
        self.terminated: ConnectionTerminated | None = None
        self.server_resets: dict[int, int] = {}
        self.status: dict[int, str] = {}
        self.body: dict[int, int] = {}
        self.ended: set[int] = set()
        self.quic.connect(self.addr, now=time.monotonic())

    def flush(self) -> None:
        for data, _ in self.quic.datagrams_to_send(now=time.monotonic()):
            try:
                self.sock.send(data)
            except OSError:
                pass  # an ICMP error from an earlier send; QUIC's timers cover it

    def pump(self, wait: float) -> None:
        """Sends what is due, waits up to `wait` s for datagrams, runs a timer that passed."""
        self.flush()
        timer = self.quic.get_timer()
        now = time.monotonic()
        t = wait if timer is None else max(0.0, min(wait, timer - now))
        ready, _, _ = select.select([self.sock], [], [], t)
        if ready:
            for _ in range(10_000):
                try:
                    data = self.sock.recv(65536, socket.MSG_DONTWAIT)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                self.quic.receive_datagram(data, self.addr, now=time.monotonic())
        timer = self.quic.get_timer()
        if timer is not None and time.monotonic() >= timer:
            self.quic.handle_timer(now=time.monotonic())
        self.events()
        self.flush()

    def events(self) -> None:
        while (ev := self.quic.next_event()) is not None:
            if isinstance(ev, HandshakeCompleted):
                self.connected = True
            elif isinstance(ev, ConnectionTerminated):
                self.terminated = ev
            elif isinstance(ev, StreamReset):
                self.server_resets[ev.stream_id] = ev.error_code
            for h in self.h3.handle_event(ev):
                if isinstance(h, HeadersReceived) and h.stream_id not in self.status:
                    self.status[h.stream_id] = dict(h.headers).get(b":status", b"?").decode()
                elif isinstance(h, DataReceived):
                    self.body[h.stream_id] = self.body.get(h.stream_id, 0) + len(h.data)
                if isinstance(h, (HeadersReceived, DataReceived)) and h.stream_ended:
                    self.ended.add(h.stream_id)

    def until(self, done, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not done() and self.terminated is None and time.monotonic() < deadline:
            self.pump(0.05)
        return done()

    def handshake(self, seconds: float = 10.0) -> None:
        if not self.until(lambda: self.connected, seconds):
            why = self.terminated.reason_phrase if self.terminated else "timed out"
            sys.exit(f"error: no handshake with {self.addr}: {why}")

    def get(self, path: str, seconds: float = 10.0, extra=None) -> tuple[int, str]:
        sid = self.quic.get_next_available_stream_id()
        self.h3.send_headers(sid, request(self.authority, path, extra=extra), end_stream=True)
        self.until(lambda: sid in self.ended or sid in self.server_resets, seconds)
        return sid, self.status.get(sid, "none")

    def close_code(self) -> str:
        if self.terminated is None:
            return "open"
        return f"{self.terminated.error_code:#x}"

    def close(self) -> None:
        if self.terminated is None:
            self.quic.close()
            self.flush()
        self.sock.close()


def first_packet(data: bytes) -> tuple[str, bytes]:
    """The first packet's kind by its long header (RFC 9000 §17.2) and its destination ID."""
    if not data or not data[0] & 0x80:
        return "short", b""
    if len(data) < 6:
        return "runt", b""
    version = int.from_bytes(data[1:5], "big")
    dcid = data[6:6 + data[5]]
    if version == 0:
        return "version-negotiation", dcid
    return ("initial", "0rtt", "handshake", "retry")[(data[0] >> 4) & 3], dcid


def cmd_flood(a: argparse.Namespace) -> int:
    addr = (a.host, a.port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.connect(addr)
    cfg = config()
    datagrams: dict[str, int] = {}
    clients: dict[str, set[bytes]] = {}
    ours: set[bytes] = set()

    def drain(wait: float) -> bool:
        got = False
        ready, _, _ = select.select([sock], [], [], wait)
        while ready:
            try:
                data = sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except ConnectionRefusedError:
                continue
            got = True
            kind, dcid = first_packet(data)
            datagrams[kind] = datagrams.get(kind, 0) + 1
            clients.setdefault(kind, set()).add(dcid)
        return got

    deadline = time.monotonic() + a.seconds
    for i in range(a.n):
        q = QuicConnection(configuration=cfg)
        q.connect(addr, now=time.monotonic())
        ours.add(q.host_cid)
        for data, _ in q.datagrams_to_send(now=time.monotonic()):
            sock.send(data)
        # Paced in bursts so neither side's receive buffer overflows; a drop would only
        # lower the counts, never make a Retry.
        if i % 25 == 24:
            drain(0.005)
        if time.monotonic() > deadline:
            break
    quiet_until = time.monotonic() + a.quiet
    while time.monotonic() < min(deadline, quiet_until):
        if drain(0.05):
            quiet_until = time.monotonic() + a.quiet
    sock.close()
    strangers = sum(len(ids - ours) for ids in clients.values())
    print(f"sent={i + 1} retry={len(clients.get('retry', ()))} "
          f"initial={len(clients.get('initial', ()))} "
          f"handshake={len(clients.get('handshake', ()))} "
          f"version-negotiation={datagrams.get('version-negotiation', 0)} "
          f"short={datagrams.get('short', 0)} retry-datagrams={datagrams.get('retry', 0)} "
          f"datagrams={sum(datagrams.values())} unknown-ids={strangers}")
    return 0


def cmd_resets(a: argparse.Namespace) -> int:
    c = Client(a.host, a.port)
    c.handshake()
    # MAX_STREAMS the server allowed at first: its concurrency limit (RFC 9000 §4.6).
    limit = c.quic._remote_max_streams_bidi
    sent = 0
    waits = 0
    deadline = time.monotonic() + a.seconds
    batch: list[int] = []

    def cancel() -> None:
        nonlocal sent
        if c.terminated is not None:
            batch.clear()  # closed meanwhile: its streams are gone
            return
        for sid in batch:
            # The server may have refused it already (then only our half is left to end).
            for end in (c.quic.stop_stream, c.quic.reset_stream):
                try:
                    end(sid, H3_REQUEST_CANCELLED)
                except ValueError:
                    pass
        sent += len(batch)
        batch.clear()
        c.pump(0)

    while sent < a.n and c.terminated is None and time.monotonic() < deadline:
        sid = c.quic.get_next_available_stream_id()
        if sid // 4 >= c.quic._remote_max_streams_bidi:
            if batch:
                cancel()
                continue
            # No stream credit: the server must give it back as the cancelled ones close.
            waits += 1
            c.pump(0.05)
            continue
        c.h3.send_headers(sid, request(c.authority, "/json"), end_stream=False)
        batch.append(sid)
        if a.when == "early":
            # Cancelled in the same packet as its HEADERS: the server may never read them.
            cancel()
        elif len(batch) == a.batch:
            # Cancelled once the server read them: a request that ends follows the batch,
            # and its answer means every HEADERS before it was read (streams open in order).
            probe = c.quic.get_next_available_stream_id()
            if probe // 4 < c.quic._remote_max_streams_bidi:
                c.h3.send_headers(probe, request(c.authority, "/plaintext"), end_stream=True)
                c.until(lambda: probe in c.ended or probe in c.server_resets, 5.0)
            cancel()
    if batch and c.terminated is None:
        cancel()
    # Whatever the server does about it arrives within a few round trips.
    c.until(lambda: False, 1.0)
    reason = c.terminated.reason_phrase if c.terminated else ""
    refused = sum(1 for code in c.server_resets.values() if code == 0x10B)
    print(f"refused={refused} initial-max-streams={limit} max-streams-now={c.quic._remote_max_streams_bidi} "
          f"cancelled={sent} credit-waits={waits} close={c.close_code()} reason={reason!r}")
    c.close()
    return 0


def cmd_credit(a: argparse.Namespace) -> int:
    c = Client(a.host, a.port)
    c.handshake()
    base = c.quic._remote_max_streams_bidi
    ids = []
    for _ in range(a.n):
        sid = c.quic.get_next_available_stream_id()
        if a.how == "early":
            c.h3.send_headers(sid, request(c.authority, "/json"), end_stream=False)
        else:
            hdrs = request(c.authority, "/upload", "POST", [(b"content-length", b"100")])
            c.h3.send_headers(sid, hdrs, end_stream=False)
            c.h3.send_data(sid, b"x", end_stream=False)
        ids.append(sid)
        if a.how == "early":
            # In the packet of its HEADERS: the server may see the reset first.
            c.quic.stop_stream(sid, H3_REQUEST_CANCELLED)
            c.quic.reset_stream(sid, H3_REQUEST_CANCELLED)
    if a.how == "body":
        # A request that ends, answered: every stream before it was read (they open in order).
        probe = c.quic.get_next_available_stream_id()
        c.h3.send_headers(probe, request(c.authority, "/plaintext"), end_stream=True)
        c.until(lambda: probe in c.ended, 5.0)
        for sid in ids:
            c.quic.stop_stream(sid, H3_REQUEST_CANCELLED)
            c.quic.reset_stream(sid, H3_REQUEST_CANCELLED)
    used = c.quic.get_next_available_stream_id() // 4
    # Every stream is closed at both ends within a few round trips: MAX_STREAMS grows by as
    # many (RFC 9000 §4.6).
    c.until(lambda: c.quic._remote_max_streams_bidi - base >= used, 3.0)
    print(f"streams={used} credit-returned={c.quic._remote_max_streams_bidi - base} "
          f"close={c.close_code()}")
    c.close()
    return 0


def cmd_bodies(a: argparse.Namespace) -> int:
    c = Client(a.host, a.port)
    c.handshake()
    limit = c.quic._remote_max_streams_bidi
    ids = []
    for _ in range(a.n):
        sid = c.quic.get_next_available_stream_id()
        hdrs = request(c.authority, "/upload", "POST", [(b"content-length", b"100")])
        c.h3.send_headers(sid, hdrs, end_stream=False)
        c.h3.send_data(sid, b"x", end_stream=False)
        ids.append(sid)
    c.until(lambda: len(c.server_resets) > 0, 5.0)
    c.until(lambda: False, 0.5)
    refused = sorted(c.server_resets.items())
    codes = ",".join(f"{sid}:{code:#x}" for sid, code in refused) or "none"
    # The ones still in flight finish and are answered.
    for sid in ids:
        if sid not in c.server_resets:
            c.h3.send_data(sid, b"y" * 99, end_stream=True)
    c.until(lambda: all(s in c.ended or s in c.server_resets for s in ids), 10.0)
    answered = [c.status.get(s, "none") for s in ids if s not in c.server_resets]
    ok = sum(1 for s in answered if s == "200")
    print(f"initial-max-streams={limit} bodies={len(ids)} refused={len(refused)} "
          f"codes={codes} answered-200={ok} close={c.close_code()}")
    c.close()
    return 0


def cmd_bigfield(a: argparse.Namespace) -> int:
    c = Client(a.host, a.port)
    c.handshake()
    # Every visible ASCII character, so Huffman coding saves little: a.size bytes of values
    # in fields of 7,520 (QPACK's encoder refuses one value of over 64 KiB).
    chunk = bytes(range(33, 127)) * 80
    extra = [(b"x-big-%d" % i, chunk) for i in range(-(-a.size // len(chunk)))]
    sid1, first = c.get("/json", 20.0, extra=extra)
    sid2, second = c.get("/json", 10.0)
    print(f"first={first} first-reset={c.server_resets.get(sid1, 'none')} second={second} "
          f"close={c.close_code()}")
    c.close()
    return 0


def slow_upstream(port: int, go: threading.Event, got: dict) -> threading.Thread:
    """An HTTP/1.1 upstream on 127.0.0.1:`port` for one request: its head read, then nothing
    until `go` (a small receive buffer, so the server's bytes wait in its own buffers), then
    the body (Content-Length) read whole and hashed, and 200. Facts go to `got`."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    ls.settimeout(30)

    def run() -> None:
        try:
            s, _ = ls.accept()
            s.settimeout(60)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(1)
                if not chunk:
                    return
                head += chunk
            got["head"] = True
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            go.wait(60)
            h = hashlib.sha256()
            n = 0
            while n < length:
                chunk = s.recv(min(1 << 16, length - n))
                if not chunk:
                    break
                h.update(chunk)
                n += len(chunk)
            got["received"] = n
            got["sha256"] = h.hexdigest()
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nstored")
            s.close()
        except OSError as e:
            got["error"] = str(e)
        finally:
            ls.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def cmd_upload(a: argparse.Namespace) -> int:
    go = threading.Event()
    got: dict = {}
    up = slow_upstream(a.upstream_port, go, got)
    body = bytes(random.Random(7).getrandbits(8) for _ in range(1 << 16)) * (a.size >> 16)
    c = Client(a.host, a.port)
    c.handshake()
    sid = c.quic.get_next_available_stream_id()
    hdrs = request(c.authority, "/up/store", "POST",
                   [(b"content-length", str(len(body)).encode())])
    c.h3.send_headers(sid, hdrs, end_stream=False)
    c.h3.send_data(sid, body, end_stream=True)
    stream = c.quic._streams[sid]
    # The upstream reads nothing: the credit the server gives for the body grows while its
    # buffers fill, then stops. Wait until it has not grown for `quiet` s (or `seconds`).
    credit, since = stream.max_stream_data_remote, time.monotonic()
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline and c.terminated is None and sid not in c.ended:
        c.pump(0.05)
        if stream.max_stream_data_remote != credit:
            credit, since = stream.max_stream_data_remote, time.monotonic()
        elif got.get("head") and time.monotonic() - since >= a.quiet:
            break
    held = credit
    go.set()
    c.until(lambda: sid in c.ended or sid in c.server_resets, 60.0)
    up.join(10)
    whole = got.get("sha256") == hashlib.sha256(body).hexdigest()
    print(f"body={len(body)} credit-held={held} upstream-received={got.get('received', 0)} "
          f"upstream-whole={int(whole)} status={c.status.get(sid, 'none')} "
          f"close={c.close_code()} {'error=' + got['error'] if 'error' in got else ''}")
    c.close()
    return 0


async def relay(a: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    rng = random.Random(a.seed)
    server = (a.host, a.port)
    # One socket toward the server per client address (None while it is being made).
    backs: dict[tuple, asyncio.DatagramTransport | None] = {}
    count = {"datagrams": 0, "dropped": 0, "reordered": 0}

    def later(send, data: bytes) -> None:
        count["datagrams"] += 1
        if rng.random() < a.loss / 100:
            count["dropped"] += 1
            return
        delay = a.delay + rng.uniform(-a.jitter, a.jitter)
        if rng.random() < a.reorder / 100:
            count["reordered"] += 1
            delay = 0  # jumps the queue, as netem's reorder does
        loop.call_later(max(delay, 0) / 1000, send, data)

    class Back(asyncio.DatagramProtocol):
        def __init__(self, client: tuple) -> None:
            self.client = client

        def datagram_received(self, data: bytes, _addr) -> None:
            later(lambda d: front.sendto(d, self.client), data)

    async def open_back(client: tuple, data: bytes) -> None:
        t, _ = await loop.create_datagram_endpoint(lambda: Back(client), remote_addr=server)
        backs[client] = t
        later(t.sendto, data)

    class Front(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr) -> None:
            if addr not in backs:
                backs[addr] = None
                loop.create_task(open_back(addr, data))
            elif (back := backs[addr]) is not None:
                later(back.sendto, data)

    front, _ = await loop.create_datagram_endpoint(Front, local_addr=(a.listen, a.listen_port))
    print(f"relay listening on {a.listen}:{a.listen_port}", flush=True)
    done = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, lambda: done.done() or done.set_result(None))
    try:
        await asyncio.wait_for(done, a.seconds)
    except asyncio.TimeoutError:
        pass
    print(" ".join(f"{k}={v}" for k, v in count.items()), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description="hostile HTTP/3 clients (aioquic, sans I/O)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("flood", "resets", "credit", "bodies", "bigfield"):
        s = sub.add_parser(name)
        s.add_argument("host")
        s.add_argument("port", type=int)
        s.add_argument("-n", type=int, default={"flood": 400, "resets": 3000,
                                                 "credit": 8, "bodies": 12}.get(name, 1))
        s.add_argument("--seconds", type=float, default=20.0, help="bound on the whole run")
        s.add_argument("--quiet", type=float, default=1.0,
                       help="flood: stop reading after this long without a reply")
        s.add_argument("--size", type=int, default=90_000,
                       help="bigfield: bytes of header values (encoded: about 0.98 of it)")
        s.add_argument("--when", choices=("early", "read"), default="read",
                       help="resets: cancel each stream with its HEADERS, or once the server read it")
        s.add_argument("--how", choices=("early", "body"), default="early",
                       help="credit: cancel with the HEADERS, or a body in flight once read")
        s.add_argument("--batch", type=int, default=4,
                       help="resets --when read: streams opened before each cancel")
    s = sub.add_parser("upload")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("--upstream-port", type=int, required=True)
    s.add_argument("--size", type=int, default=32 << 20, help="body bytes (a multiple of 64 KiB)")
    s.add_argument("--quiet", type=float, default=1.0,
                   help="the credit is held once it has not grown for this long (s)")
    s.add_argument("--seconds", type=float, default=20.0, help="bound on the held phase")
    s = sub.add_parser("relay")
    s.add_argument("listen_port", type=int)
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("--listen", default="127.0.0.1")
    s.add_argument("--loss", type=float, default=3.0, help="percent dropped, each way")
    s.add_argument("--delay", type=float, default=20.0, help="ms each way")
    s.add_argument("--jitter", type=float, default=5.0, help="ms, uniform")
    s.add_argument("--reorder", type=float, default=5.0, help="percent sent at once")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--seconds", type=float, default=300.0, help="how long the relay lives")
    a = p.parse_args()
    if a.cmd == "relay":
        asyncio.run(relay(a))
        return 0
    return {"flood": cmd_flood, "resets": cmd_resets, "credit": cmd_credit, "bodies": cmd_bodies,
            "bigfield": cmd_bigfield, "upload": cmd_upload}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
