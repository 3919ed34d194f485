#!/usr/bin/env python3
"""Write the seed corpus of fuzz_agentproto (protocol.md 1.9.4).

    tests/fuzz/gen-corpus-agentproto.py [tests/fuzz/corpus/agentproto]

Valid hellos and messages of every kind, and a few near misses, in the
harness's input format (one mode byte, then the PDU), packed here with
struct, independently of the codec.  Files named regress-* are left alone.
"""
import os
import struct
import sys

V = 0x0111
REQ, REP = 0x8067, 0x0067
HELLO_REQ, HELLO_REP, FROM_AGENT, FROM_GW = 0, 1, 2, 3


def pad(s, n):
    return s.encode().ljust(n, b"\0")


def hello(code, status, kind, body, ver=1):
    return struct.pack(">HHIHHI", V, code, status, ver, kind, len(body)) + body


def msg(t, seq, body, flags=0):
    return struct.pack(">IHHI", 8 + len(body), t, flags, seq) + body


def record(busid, nintf):
    r = pad("/sys/devices/pci0000:00/usb1/" + busid, 256) + pad(busid, 32)
    r += struct.pack(">IIIHHHBBBBBB", 1, 3, 3, 0x0781, 0x5567, 0x0100,
                     0, 0, 0, 1, 1, nintf)
    return r + b"".join(struct.pack("BBBB", 8, 6, 0x50 + i, 0)
                        for i in range(nintf))


TOKEN = bytes(range(16))
seeds = {
    "control-req": (HELLO_REQ, hello(REQ, 0, 1, pad("tc17", 32) +
                                     struct.pack(">I", 0) + bytes(16))),
    "control-rep": (HELLO_REP, hello(REP, 0, 1, pad("gw", 32) +
                                     struct.pack(">IH", 0, 15))),
    "control-refused": (HELLO_REP, hello(REP, 1, 1, b"")),
    "dialback-req": (HELLO_REQ, hello(REQ, 0, 2, TOKEN + pad("1-2", 32))),
    "dialback-rep": (HELLO_REP, hello(REP, 0, 2, b"")),
    "hello-v2": (HELLO_REQ, hello(REQ, 0, 1, b"\xee" * 20, ver=2)),
    "hello-bad-kind": (HELLO_REQ, hello(REQ, 0, 9, b"")),
    "snapshot-begin": (FROM_AGENT, msg(1, 1, struct.pack(">I", 2))),
    "snapshot-end": (FROM_AGENT, msg(2, 4, b"")),
    "dev-added-0": (FROM_AGENT, msg(3, 2, record("1-1", 0))),
    "dev-added-2": (FROM_AGENT, msg(3, 3, record("1-2.4", 2))),
    "dev-added-32": (FROM_AGENT, msg(3, 3, record("2-1", 32))),
    "dev-removed": (FROM_AGENT, msg(4, 5, pad("1-2.4", 32))),
    "open-import": (FROM_GW, msg(5, 1, pad("1-2", 32) + TOKEN)),
    "open-failed": (FROM_AGENT, msg(6, 6, TOKEN + struct.pack(">I", 4))),
    "ping-agent": (FROM_AGENT, msg(7, 7, struct.pack(">Q", 1 << 40))),
    "pong-gw": (FROM_GW, msg(8, 2, struct.pack(">Q", 5))),
    "bye": (FROM_GW, msg(9, 3, struct.pack(">I", 1))),
    "msg-flags": (FROM_AGENT, msg(7, 1, bytes(8), flags=1)),
    "msg-huge": (FROM_AGENT, struct.pack(">IHHI", 0x7fffffff, 3, 0, 1)),
}

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "corpus", "agentproto")
os.makedirs(out, exist_ok=True)
for name, (mode, pdu) in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mode]) + pdu)
