"""Calls test.Sum/Add on the grpc_auth example with Python's grpcio (an independent gRPC
client): without a bearer token, with a wrong one, with the right one; and test.Sum/Slow past
the route's 100 ms timeout. Prints each call's status code and message."""
import sys
import grpc

addr = sys.argv[1]

def sum_request(a, b):
    # benchmark.SumRequest {a = 1; b = 2} (int32 varints), encoded by hand: no protoc needed.
    def varint(n):
        out = b""
        while True:
            byte = n & 0x7F
            n >>= 7
            if n:
                out += bytes([byte | 0x80])
            else:
                return out + bytes([byte])
    return b"\x08" + varint(a) + b"\x10" + varint(b)

def decode_result(raw):
    # benchmark.SumReply {result = 1}: tag 0x08 then a varint (empty for 0).
    if not raw:
        return 0
    n, shift = 0, 0
    for byte in raw[1:]:
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return n

with grpc.insecure_channel(addr) as channel:
    add = channel.unary_unary("/test.Sum/Add")
    slow = channel.unary_unary("/test.Sum/Slow")
    cases = [
        ("Add, no token", add, sum_request(2, 3), None),
        ("Add, wrong token", add, sum_request(2, 3), [("authorization", "Bearer bad")]),
        ("Add, good token", add, sum_request(2, 3), [("authorization", "Bearer good")]),
        ("Slow 1000 ms, good token", slow, sum_request(0, 1000), [("authorization", "Bearer good")]),
    ]
    for name, method, request, metadata in cases:
        try:
            reply = method(request, metadata=metadata, timeout=10)
            print(f"{name}: OK result={decode_result(reply)}")
        except grpc.RpcError as e:
            print(f"{name}: {e.code().name} ({e.code().value[0]}) message={e.details()!r}")
