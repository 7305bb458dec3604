#!/usr/bin/env python3
"""Writes the gRPC frames bench/bank.toml's `grpc` workload sends and expects, under
bench/out/bank/ (or the directory given):

  get3.bin      GetAccountRequest { id: 3 }: 00 00 00 00 02 08 03
  get3.expect   its answer's DATA: Account { id: 3, owner: "owner 3", balance: BALANCE }

Account 3, because the `transfer` workload moves money from 1 to 2 and never touches 3, so its
answer stays the same bytes. BALANCE is bench/bank/seed.sql's default (10^12 cents). Field
numbers: bench/bank/bank.proto. Each frame is length-prefixed (flag 0, a 4-byte big-endian
length, the protobuf bytes).

  python3 bench/bank/frames.py [DIR]
"""
import os
import sys

# The protobuf and gRPC framing helpers bench/grpc_frames.py has (varint, field, frame).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from grpc_frames import field, frame  # noqa: E402

ACCOUNT = 3
BALANCE = 10**12


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "out", "bank")
    os.makedirs(out, exist_ok=True)
    request = field(1, 0, ACCOUNT)
    account = field(1, 0, ACCOUNT) + field(2, 2, b"owner %d" % ACCOUNT) + field(3, 0, BALANCE)
    with open(os.path.join(out, "get3.bin"), "wb") as f:
        f.write(frame(request))
    with open(os.path.join(out, "get3.expect"), "wb") as f:
        f.write(frame(account))


if __name__ == "__main__":
    main()
