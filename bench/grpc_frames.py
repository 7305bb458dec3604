#!/usr/bin/env python3
"""Writes the gRPC request and expected-answer frames the gRPC suites send (bench/grpc.toml,
bench/grpc_proxy.toml), under bench/out/grpc/ (or the directory given):

  getsum.bin             HttpArena's prebuilt GetSum request, SumRequest { a: 1, b: 2 }:
                         00 00 00 00 04 08 01 10 02
  getsum.expect          its answer's DATA, SumReply { result: 3 }: 00 00 00 00 02 08 03
  stream100.bin          StreamingOutputCallRequest with 100 ResponseParameters { size: 100 }
  stream100.expect       its answer's DATA: 100 StreamingOutputCallResponse messages, each
                         Payload { body: 100 zero bytes }

Each is length-prefixed (flag 0, a 4-byte big-endian length, the protobuf bytes). Field numbers:
bench/tonic-grpc/proto (HttpArena's benchmark.proto, gRPC interop's messages.proto).

  python3 bench/grpc_frames.py [DIR]
"""
import os
import sys

MESSAGES = 100
SIZE = 100


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    """A field: its tag, then a varint value (wire 0) or length-delimited bytes (wire 2)."""
    tag = varint(num << 3 | wire)
    if wire == 0:
        return tag + varint(payload)
    return tag + varint(len(payload)) + payload


def frame(message):
    return b"\x00" + len(message).to_bytes(4, "big") + message


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out", "grpc")
    os.makedirs(out, exist_ok=True)
    get_sum = frame(field(1, 0, 1) + field(2, 0, 2))
    assert get_sum == bytes.fromhex("000000000408011002")
    sum3 = frame(field(1, 0, 3))
    assert sum3 == bytes.fromhex("00000000020803")
    # StreamingOutputCallRequest.response_parameters = 2; ResponseParameters.size = 1.
    stream = frame(b"".join(field(2, 2, field(1, 0, SIZE)) for _ in range(MESSAGES)))
    # StreamingOutputCallResponse.payload = 1; Payload.body = 2 (type COMPRESSABLE = 0 is
    # proto3's default and not written).
    reply = frame(field(1, 2, field(2, 2, bytes(SIZE))))
    files = {
        "getsum.bin": get_sum,
        "getsum.expect": sum3,
        "stream100.bin": stream,
        "stream100.expect": reply * MESSAGES,
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"grpc_frames: wrote {', '.join(files)} to {out}")


if __name__ == "__main__":
    main()
