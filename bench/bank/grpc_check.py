#!/usr/bin/env python3
"""A gRPC end-to-end check of a bank server (bench/bank/e2e.sh runs it), with grpcio as the
independent client: GetAccount and Transfer with a good bearer, without one and with an unknown
one, an unknown account, insufficient funds and a self-transfer, each call's status checked.
The messages are encoded by hand (bench/bank/bank.proto's field numbers), so only grpcio is
needed (no protoc, no generated code).

  python3 bench/bank/grpc_check.py HOST:PORT TOKEN     exits 1 on the first wrong answer
"""
import sys

import grpc


def varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, value):
    if isinstance(value, bytes):
        return varint(num << 3 | 2) + varint(len(value)) + value
    return varint(num << 3) + varint(value)


def decode(data):
    """A message's fields as {number: value} (varints and length-delimited bytes)."""
    fields, i = {}, 0
    while i < len(data):
        tag, i = read_varint(data, i)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            fields[num], i = read_varint(data, i)
        elif wire == 2:
            n, i = read_varint(data, i)
            fields[num], i = data[i:i + n], i + n
        else:
            raise ValueError("unexpected wire type %d" % wire)
    return fields


def read_varint(data, i):
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def main():
    target, token = sys.argv[1], sys.argv[2]
    channel = grpc.insecure_channel(target)
    raw = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    get = channel.unary_unary("/bank.Bank/GetAccount", **raw)
    transfer = channel.unary_unary("/bank.Bank/Transfer", **raw)
    good = [("authorization", "Bearer " + token)]
    failures = 0

    def expect(what, call, code):
        nonlocal failures
        try:
            reply = call()
            got = grpc.StatusCode.OK
        except grpc.RpcError as e:
            reply, got = None, e.code()
        ok = got == code
        print("%-4s %-44s %s" % ("ok" if ok else "FAIL", what, got.name))
        failures += not ok
        return reply

    reply = expect("GetAccount 3", lambda: get(field(1, 3), metadata=good, timeout=5), grpc.StatusCode.OK)
    if reply is not None:
        f = decode(reply)
        ok = f.get(1) == 3 and f.get(2) == b"owner 3"
        print("%-4s %-44s %r" % ("ok" if ok else "FAIL", "  its fields", f))
        failures += not ok
    expect("GetAccount without a bearer", lambda: get(field(1, 3), timeout=5), grpc.StatusCode.UNAUTHENTICATED)
    expect("GetAccount with an unknown bearer",
           lambda: get(field(1, 3), metadata=[("authorization", "Bearer nobody")], timeout=5),
           grpc.StatusCode.UNAUTHENTICATED)
    expect("GetAccount 999999 (unknown)", lambda: get(field(1, 999999), metadata=good, timeout=5),
           grpc.StatusCode.NOT_FOUND)
    msg = field(1, 4) + field(2, 5) + field(3, 7)
    reply = expect("Transfer 7 from 4 to 5", lambda: transfer(msg, metadata=good, timeout=5), grpc.StatusCode.OK)
    if reply is not None:
        print("     %-44s %r" % ("  its reply", decode(reply)))
    too_much = field(1, 4) + field(2, 5) + field(3, 10**15)
    expect("Transfer 10^15 from 4 (insufficient)", lambda: transfer(too_much, metadata=good, timeout=5),
           grpc.StatusCode.FAILED_PRECONDITION)
    expect("Transfer from 4 to 4", lambda: transfer(field(1, 4) + field(2, 4) + field(3, 1), metadata=good, timeout=5),
           grpc.StatusCode.INVALID_ARGUMENT)
    expect("Transfer without a bearer", lambda: transfer(msg, timeout=5), grpc.StatusCode.UNAUTHENTICATED)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
