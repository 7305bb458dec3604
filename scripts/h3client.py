#!/usr/bin/env python3
"""Minimal HTTP/3 test client built on aioquic.

Sends one request (or N requests over a single QUIC connection, with a configurable number in
flight), with a body and trailers if asked, and prints, for every response, the status, the
headers, the body length and SHA-256, and any trailers.

Exit status: 0 when every request got a complete response; 1 on connection/stream errors or
the overall timeout; 2 on usage errors; 3 when --expect-status is given and a status differs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import ssl
import sys
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamReset

USER_AGENT = "h3client/aioquic"


@dataclass
class Response:
    stream_id: int
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    trailers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)

    @property
    def status(self) -> str:
        for name, value in self.headers:
            if name == b":status":
                return value.decode()
        return "?"


class H3ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._pending: dict[int, tuple[Response, asyncio.Future[Response]]] = {}
        self.terminated: ConnectionTerminated | None = None

    async def request(
        self, method: str, authority: str, path: str, headers: list[tuple[bytes, bytes]],
        body: bytes | None, trailers: list[tuple[bytes, bytes]] | None = None,
    ) -> Response:
        stream_id = self._quic.get_next_available_stream_id()
        request_headers = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", USER_AGENT.encode()),
        ]
        if body is not None:
            request_headers.append((b"content-length", str(len(body)).encode()))
        request_headers.extend(headers)
        response = Response(stream_id)
        future: asyncio.Future[Response] = self._loop.create_future()
        self._pending[stream_id] = (response, future)
        self._http.send_headers(stream_id, request_headers,
                                end_stream=body is None and not trailers)
        if body is not None:
            self._http.send_data(stream_id, body, end_stream=not trailers)
        if trailers:
            # RFC 9114 §4.1: a second HEADERS frame, the trailer section, ends the request.
            self._http.send_headers(stream_id, trailers, end_stream=True)
        self.transmit()
        return await future

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
            error = ConnectionError(
                f"connection terminated: error_code={event.error_code:#x} "
                f"reason={event.reason_phrase!r}"
            )
            for _, future in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()
        elif isinstance(event, StreamReset) and event.stream_id in self._pending:
            _, future = self._pending.pop(event.stream_id)
            if not future.done():
                future.set_exception(
                    ConnectionError(f"stream {event.stream_id} reset: {event.error_code:#x}")
                )
        for h3_event in self._http.handle_event(event):
            self._h3_event_received(h3_event)

    def _h3_event_received(self, event: H3Event) -> None:
        if not isinstance(event, (HeadersReceived, DataReceived)):
            return
        entry = self._pending.get(event.stream_id)
        if entry is None:
            return
        response, future = entry
        if isinstance(event, HeadersReceived):
            # The first HEADERS is the response head; a later one carries trailers.
            if not response.headers:
                response.headers = list(event.headers)
            else:
                response.trailers.extend(event.headers)
        else:
            response.body.extend(event.data)
        if event.stream_ended:
            del self._pending[event.stream_id]
            if not future.done():
                future.set_result(response)


def _quiet_handshake_waiter(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    # When the overall timeout cancels a pending handshake, aioquic later fails its shielded
    # "connected" waiter with ConnectionError that nobody awaits; don't print that as noise.
    if isinstance(context.get("exception"), ConnectionError):
        return
    loop.default_exception_handler(context)


def parse_header(raw: str) -> tuple[bytes, bytes]:
    # A pseudo-header (":path: /x") keeps its leading colon: the separator is the next one.
    pseudo = raw.startswith(":")
    name, sep, value = raw[pseudo:].partition(":")
    name = ":" * pseudo + name
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"header must look like 'Name: value', got {raw!r}")
    return name.strip().lower().encode(), value.strip().encode()


def print_response(index: int, response: Response, print_body: bool) -> None:
    print(f"[{index}] stream={response.stream_id} status={response.status}")
    for name, value in response.headers:
        if not name.startswith(b":"):
            print(f"  {name.decode(errors='replace')}: {value.decode(errors='replace')}")
    digest = hashlib.sha256(response.body).hexdigest()
    print(f"  body: {len(response.body)} bytes sha256={digest}")
    for name, value in response.trailers:
        print(f"  trailer {name.decode(errors='replace')}: {value.decode(errors='replace')}")
    if print_body:
        sys.stdout.write(response.body.decode(errors="replace"))
        if response.body and not response.body.endswith(b"\n"):
            sys.stdout.write("\n")


async def run(args: argparse.Namespace) -> int:
    url = urlsplit(args.url)
    if url.scheme != "https" or not url.hostname:
        print(f"error: URL must be https://HOST[:PORT]/path, got {args.url!r}", file=sys.stderr)
        return 2
    port = url.port or 443
    authority = url.netloc
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    body = open(args.data, "rb").read() if args.data else None
    method = args.method or ("POST" if body is not None else "GET")

    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    configuration.server_name = args.server_name or url.hostname
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    elif args.ca:
        configuration.load_verify_locations(cafile=args.ca)

    # aioquic's connect() raises a bare ConnectionError when the handshake fails; keep a handle
    # on the protocol so the peer's (or our own TLS stack's) close reason can be reported.
    protocols: list[H3ClientProtocol] = []

    def create_protocol(*a, **kw) -> H3ClientProtocol:
        protocols.append(H3ClientProtocol(*a, **kw))
        return protocols[-1]

    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_handshake_waiter)
    try:
        async with connect(
            url.hostname, port, configuration=configuration, create_protocol=create_protocol
        ) as client:
            return await run_requests(client, args, method, authority, path, body)
    except ConnectionError:
        event = protocols[-1].terminated if protocols else None
        if event is None:
            raise
        raise ConnectionError(
            f"connection closed: error_code={event.error_code:#x} reason={event.reason_phrase!r}"
        ) from None


async def run_requests(
    client: H3ClientProtocol, args: argparse.Namespace, method: str, authority: str, path: str,
    body: bytes | None,
) -> int:
    limit = asyncio.Semaphore(args.concurrency)

    async def one() -> Response:
        async with limit:
            return await client.request(method, authority, path, args.header, body,
                                        args.trailer)

    results = await asyncio.gather(*(one() for _ in range(args.repeat)), return_exceptions=True)
    failures = 0
    bad_status = False
    for index, result in enumerate(results):
        if isinstance(result, BaseException):
            print(f"[{index}] error: {result}")
            failures += 1
            continue
        print_response(index, result, args.print_body)
        if args.expect_status is not None and result.status != str(args.expect_status):
            bad_status = True
    if failures:
        return 1
    return 3 if bad_status else 0


def main() -> int:
    parser = argparse.ArgumentParser(description="HTTP/3 test client (aioquic)")
    parser.add_argument("url", help="https://HOST:PORT/path")
    parser.add_argument("-X", "--method", help="request method (default GET, or POST with -d)")
    parser.add_argument("-d", "--data", metavar="FILE", help="send FILE as the request body")
    parser.add_argument("-H", "--header", action="append", default=[], type=parse_header,
                        metavar="'Name: value'", help="extra request header (repeatable)")
    parser.add_argument("--trailer", action="append", default=[], type=parse_header,
                        help="'Name: value' sent in a trailer section after the body (repeatable)")
    parser.add_argument("-n", "--repeat", type=int, default=1,
                        help="number of requests on one connection (default 1)")
    parser.add_argument("-c", "--concurrency", type=int, default=1,
                        help="requests in flight at once (default 1 = sequential)")
    tls = parser.add_mutually_exclusive_group()
    tls.add_argument("-k", "--insecure", action="store_true", help="do not verify the certificate")
    tls.add_argument("--ca", metavar="FILE", help="PEM file of trusted CA certificates")
    parser.add_argument("--server-name", help="TLS SNI / verification name (default: URL host)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="hard overall timeout in seconds (default 20)")
    parser.add_argument("--expect-status", type=int, metavar="CODE",
                        help="exit 3 unless every response has this status")
    parser.add_argument("--print-body", action="store_true", help="also print bodies as text")
    parser.add_argument("-v", "--verbose", action="store_true", help="log aioquic's QUIC events")
    args = parser.parse_args()
    if args.repeat < 1 or args.concurrency < 1:
        parser.error("--repeat and --concurrency must be >= 1")
    # aioquic logs handshake failures itself (logger "quic"); we report them on our own.
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR,
                        format="%(name)s %(levelname)s %(message)s")

    try:
        return asyncio.run(asyncio.wait_for(run(args), timeout=args.timeout))
    except asyncio.TimeoutError:
        print(f"error: timed out after {args.timeout}s", file=sys.stderr)
    except (ConnectionError, OSError) as exc:
        print(f"error: {exc.__class__.__name__}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
