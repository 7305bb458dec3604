#!/usr/bin/env python3
"""NAT rebinding against an HTTP/3 server, for scripts/h3-migrate.sh: aioquic's sans-I/O
QuicConnection and H3Connection driven by hand, each connection over its own UDP socket.

  h3migrate.py HOST PORT --conns N --rebinds R --file-path /static/x --file LOCAL

N connections shake hands and each GETs /plaintext ("Hello, World!") and the file (byte for
byte against LOCAL). Then, R times, every live connection moves to a NEW UDP socket (a new
source port: a NAT rebinding, RFC 9000 §9.3 — the client itself does not know it moved, so it
keeps its connection ID; the last move also switches to a fresh one of the server's IDs where
the server gave any, RFC 9000 §9.5) and makes the same two requests from there. A new 4-tuple
lands on whichever of the server's reuseport sockets the kernel's hash picks, so some of the
moved connections reach another worker than their own.

--move-in-handshake also moves each connection once mid-handshake (after the server's first
flight, before the client's Handshake packets). It is a probe, not used by h3-migrate.sh: the
server routes those Handshake packets to their worker, but quinn-proto drops every packet from a
new address while the handshake is in progress (RFC 9000 §9: endpoints keep their address for
the handshake), so every such connection is lost, moved to another worker or not.

One line per phase: `phase=NAME conns=C ok=K failed=F` and a `failure=` line per failed
connection (why: a wrong status or body, the connection closed, or no answer before the
phase's deadline). Every loop is bounded by a count and a deadline. Exit 0 when every request
of every phase was answered right, 1 otherwise, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import select
import socket
import ssl
import sys
import time

from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, StreamReset

PLAINTEXT = b"Hello, World!"
# Datagrams read from one socket per wakeup, at most (the loop stays fair and bounded).
READ_BURST = 256


def config() -> QuicConfiguration:
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    cfg.verify_mode = ssl.CERT_NONE
    cfg.server_name = "localhost"
    # Longer than any phase: a connection the server lost must not pass for idle-closed.
    cfg.idle_timeout = 120.0
    return cfg


def new_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


class Conn:
    """One connection: its QUIC and HTTP/3 state, its current socket, its requests."""

    def __init__(self, index: int, addr: tuple[str, int], move_in_handshake: bool) -> None:
        self.index = index
        self.addr = addr
        self.authority = f"{addr[0]}:{addr[1]}"
        self.sock = new_socket()
        self.quic = QuicConnection(configuration=config())
        self.h3 = H3Connection(self.quic)
        self.connected = False
        self.terminated: ConnectionTerminated | None = None
        self.failure: str | None = None
        # Moves that also switched to a new server connection ID.
        self.new_ids = 0
        # Move once the server's first flight is in, before the client's Handshake flight.
        self.move_in_handshake = move_in_handshake
        # stream id -> [path, status, body, ended]
        self.streams: dict[int, list] = {}
        self.quic.connect(addr, now=time.monotonic())

    def peer_cid(self) -> bytes:
        """The server's connection ID this client sends to (aioquic keeps it private)."""
        cid = getattr(self.quic, "_peer_cid", None)
        return getattr(cid, "cid", b"")

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def rebind(self, new_cid: bool) -> None:
        """Sends from now on from a new socket; the old one is closed (the NAT forgot it).
        The new one is bound before the old closes, so its port differs."""
        sock = new_socket()
        self.sock.close()
        self.sock = sock
        if new_cid:
            # aioquic keeps the current ID when the server gave no spare one.
            before = self.peer_cid()
            self.quic.change_connection_id()
            self.new_ids += self.peer_cid() != before

    def get(self, path: str) -> None:
        sid = self.quic.get_next_available_stream_id()
        self.h3.send_headers(sid, [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", self.authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"h3migrate/aioquic"),
        ], end_stream=True)
        self.streams[sid] = [path, None, bytearray(), False]

    def flush(self) -> None:
        for data, addr in self.quic.datagrams_to_send(now=time.monotonic()):
            try:
                self.sock.sendto(data, addr)
            except OSError:
                pass  # QUIC's own timers retransmit

    def read(self) -> int:
        n = 0
        for _ in range(READ_BURST):
            try:
                data, addr = self.sock.recvfrom(65536)
            except (BlockingIOError, ConnectionRefusedError):
                break
            self.quic.receive_datagram(data, addr, now=time.monotonic())
            n += 1
        return n

    def timer(self) -> None:
        t = self.quic.get_timer()
        if t is not None and time.monotonic() >= t:
            self.quic.handle_timer(now=time.monotonic())

    def events(self) -> None:
        while (ev := self.quic.next_event()) is not None:
            if isinstance(ev, HandshakeCompleted):
                self.connected = True
            elif isinstance(ev, ConnectionTerminated):
                self.terminated = ev
            elif isinstance(ev, StreamReset) and ev.stream_id in self.streams:
                self.failure = f"stream {ev.stream_id} reset ({ev.error_code:#x})"
            for h in self.h3.handle_event(ev):
                st = self.streams.get(getattr(h, "stream_id", -1))
                if st is None:
                    continue
                if isinstance(h, HeadersReceived) and st[1] is None:
                    st[1] = dict(h.headers).get(b":status", b"?").decode()
                elif isinstance(h, DataReceived):
                    st[2].extend(h.data)
                if isinstance(h, (HeadersReceived, DataReceived)) and h.stream_ended:
                    st[3] = True

    def done(self) -> bool:
        """The phase is over for this connection: answered, or failed."""
        if self.failure is not None or self.terminated is not None:
            return True
        return bool(self.streams) and all(st[3] for st in self.streams.values())


def run_phase(conns: list[Conn], name: str, file_path: str, file_bytes: bytes,
              seconds: float) -> int:
    """Each connection (handshaking first where new) GETs /plaintext and the file; returns the
    number of connections whose two answers were right."""
    for c in conns:
        c.streams.clear()
        if c.connected:
            c.get("/plaintext")
            c.get(file_path)
    deadline = time.monotonic() + seconds
    # Bounded by the deadline; the count bound only guards a clock that stands still.
    for _ in range(1_000_000):
        live = [c for c in conns if not c.done()]
        now = time.monotonic()
        if not live or now >= deadline:
            break
        for c in live:
            c.flush()
        wait = deadline - now
        for c in live:
            t = c.quic.get_timer()
            if t is not None:
                wait = min(wait, max(0.0, t - now))
        ready, _, _ = select.select([c.sock for c in live], [], [], min(wait, 0.1))
        for c in live:
            if c.sock in ready and c.read() and c.move_in_handshake and not c.connected:
                # The answer to what the server just sent goes from a new port: its
                # Handshake packets reach whichever worker the new 4-tuple hashes to.
                c.rebind(new_cid=False)
                c.move_in_handshake = False
            c.timer()
            c.events()
            if c.connected and not c.streams:
                c.get("/plaintext")
                c.get(file_path)
            c.flush()
    ok = 0
    for c in conns:
        if c.failure is None:
            c.failure = judge(c, file_path, file_bytes)
        if c.failure is None:
            ok += 1
        else:
            print(f"failure= phase={name} conn={c.index} port={c.port} why={c.failure!r}")
    print(f"phase={name} conns={len(conns)} ok={ok} failed={len(conns) - ok}", flush=True)
    return ok


def judge(c: Conn, file_path: str, file_bytes: bytes) -> str | None:
    """Why this connection's phase failed, or None."""
    if c.terminated is not None:
        t = c.terminated
        return f"connection closed ({t.error_code:#x} {t.reason_phrase!r})"
    if not c.connected:
        return "no handshake before the deadline"
    want = {"/plaintext": PLAINTEXT, file_path: file_bytes}
    for sid, (path, status, body, ended) in sorted(c.streams.items()):
        if not ended:
            return f"{path}: no whole answer before the deadline (status {status})"
        if status != "200":
            return f"{path}: status {status}"
        if bytes(body) != want[path]:
            return f"{path}: {len(body)} bytes, not the {len(want[path])} expected"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--rebinds", type=int, default=2)
    p.add_argument("--file-path", required=True, help="the file's URL path on the server")
    p.add_argument("--file", required=True, help="the same file, here")
    p.add_argument("--move-in-handshake", action="store_true",
                   help="also move each connection between the server's first flight and the "
                   "client's Handshake packets")
    p.add_argument("--seconds", type=float, default=20.0, help="deadline of each phase")
    a = p.parse_args()
    if a.conns < 1 or a.rebinds < 0:
        p.error("--conns must be at least 1 and --rebinds not negative")
    with open(a.file, "rb") as f:
        file_bytes = f.read()

    conns = [Conn(i, (a.host, a.port), a.move_in_handshake) for i in range(a.conns)]
    all_ok = run_phase(conns, "before", a.file_path, file_bytes, a.seconds) == len(conns)
    moved_ports = 0
    for r in range(1, a.rebinds + 1):
        live = [c for c in conns if c.failure is None]
        if not live:
            break
        for c in live:
            old = c.port
            c.rebind(new_cid=r == a.rebinds)
            moved_ports += c.port != old
        ok = run_phase(live, f"rebind{r}", a.file_path, file_bytes, a.seconds)
        all_ok = all_ok and ok == len(conns)
    print(f"summary conns={len(conns)} rebinds={a.rebinds} moves={moved_ports} "
          f"new_ids={sum(c.new_ids for c in conns)} ok={sum(c.failure is None for c in conns)}",
          flush=True)
    for c in conns:
        if c.terminated is None:
            c.quic.close()
            c.flush()
        c.sock.close()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
