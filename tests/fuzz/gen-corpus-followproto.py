#!/usr/bin/env python3
"""Write the seed corpus of fuzz_followproto (protocol.md 1.10.8).

    tests/fuzz/gen-corpus-followproto.py [tests/fuzz/corpus/followproto]

Valid hellos and messages of every kind, both directions, and a few near
misses, in the harness's input format (one mode byte, then the PDU),
packed here with struct, independently of the codec.  Files named
regress-* are left alone.
"""
import os
import struct
import sys

V = 0x0111
REQ, REP = 0x8068, 0x0068
HELLO_REQ, HELLO_REP, FROM_GW, FROM_HOST = 0, 1, 2, 3


def pad(s, n):
    return s.encode().ljust(n, b"\0")


def hello(code, status, body, ver=1, kind=1, blen=None):
    return struct.pack(">HHIHHI", V, code, status, ver, kind,
                       len(body) if blen is None else blen) + body


def msg(t, seq, body, flags=0, mlen=None):
    return struct.pack(">IHHI", 8 + len(body) if mlen is None else mlen,
                       t, flags, seq) + body


seeds = {
    "req": (HELLO_REQ, hello(REQ, 0, struct.pack(">I", 0))),
    "req-caps": (HELLO_REQ, hello(REQ, 0, struct.pack(">I", 0xffffffff))),
    "req-v2": (HELLO_REQ, hello(REQ, 0, b"\xee" * 20, ver=2)),
    "req-bad-kind": (HELLO_REQ, hello(REQ, 0, struct.pack(">I", 0), kind=9)),
    "req-long-body": (HELLO_REQ, hello(REQ, 0, b"", blen=2048)),
    "req-import": (HELLO_REQ, struct.pack(">HHI", V, 0x8003, 0) +
                   pad("1-1", 32)),
    "rep-ok": (HELLO_REP, hello(REP, 0, struct.pack(">H", 15) +
                                pad("vdi01", 64))),
    "rep-ok-addr": (HELLO_REP, hello(REP, 0, struct.pack(">H", 3600) +
                                     pad("::ffff:127.0.0.1", 64))),
    "rep-na": (HELLO_REP, hello(REP, 1, b"")),
    "rep-v3": (HELLO_REP, hello(REP, 0, b"x" * 7, ver=3)),
    "rep-hb0": (HELLO_REP, hello(REP, 0, struct.pack(">H", 0) +
                                 pad("vdi01", 64))),
    "list-begin": (FROM_GW, msg(1, 1, struct.pack(">I", 2))),
    "list-end": (FROM_GW, msg(2, 4, b"")),
    "authorized": (FROM_GW, msg(3, 2, pad("3-1.4", 32))),
    "authorized-long": (FROM_GW, msg(3, 3, pad("a" * 31, 32)[:31] + b"\0")),
    "withdrawn": (FROM_GW, msg(4, 5, pad("3-1", 32) + struct.pack(">I", 1))),
    "withdrawn-gone": (FROM_GW, msg(4, 6, pad("3-1", 32) +
                                    struct.pack(">I", 2))),
    "withdrawn-reason0": (FROM_GW, msg(4, 6, pad("3-1", 32) + bytes(4))),
    "ping": (FROM_GW, msg(5, 7, struct.pack(">Q", 1 << 40 | 7))),
    "pong": (FROM_HOST, msg(6, 1, struct.pack(">Q", 1 << 40 | 7))),
    "pong-from-gw": (FROM_GW, msg(6, 1, struct.pack(">Q", 1))),
    "msg-flags": (FROM_HOST, msg(6, 1, bytes(8), flags=1)),
    "msg-huge": (FROM_GW, msg(3, 1, b"", mlen=0x7fffffff)),
    "busid-unpadded": (FROM_GW, msg(3, 1, b"1-1\0junk" + bytes(24))),
}

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "corpus", "followproto")
os.makedirs(out, exist_ok=True)
for name, (mode, pdu) in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mode]) + pdu)
