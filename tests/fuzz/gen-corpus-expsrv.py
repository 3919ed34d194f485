#!/usr/bin/env python3
"""Write the seed corpus of fuzz_expsrv (valid client PDU sequences).

    tests/fuzz/gen-corpus-expsrv.py [tests/fuzz/corpus/expsrv]

Input format: see the comment at the top of tests/fuzz/fuzz_expsrv.c
(one flags byte, then what the client sends).  Packed here with struct,
independently of the codec.  Files named regress-* are left alone.
"""
import os
import struct
import sys

DEVID = (1 << 16) | 2
OUT, IN = 0, 1


def be32(*v):
    return b"".join(struct.pack(">I", x & 0xffffffff) for x in v)


def op(code, busid=None):
    b = struct.pack(">HHI", 0x0111, code, 0)
    if busid is not None:
        b += busid.encode().ljust(32, b"\0")
    return b


def submit(seq, direction, ep, length, setup=b"\0" * 8, npk=0, iso=(),
           data=True):
    h = be32(1, seq, DEVID, direction, ep, 0, length, 0, npk, 0) + setup
    if direction == OUT and data:
        h += b"\x5a" * length
    for off, ln in iso:
        h += be32(off, ln, 0, 0)
    return h


def unlink(seq, target):
    return be32(2, seq, DEVID, 0, 0, target) + b"\0" * 24


def ctrl_in(seq, req=6, value=0x100, length=18):
    setup = struct.pack("<BBHHH", 0x80, req, value, 0, length)
    return submit(seq, IN, 0, length, setup)


IMPORT = op(0x8003, "1-1")
SEEDS = {
    "devlist": bytes([0]) + op(0x8005),
    "import-refused": bytes([0]) + op(0x8003, "9-9"),
    "control": bytes([0]) + IMPORT + ctrl_in(1) + ctrl_in(2, 6, 0x200, 9),
    "bulk-unlink-drop": bytes([0]) + IMPORT + submit(1, IN, 1, 512) +
    unlink(2, 1) + submit(3, OUT, 1, 64),
    "bulk-unlink-later": bytes([1]) + IMPORT + submit(1, IN, 1, 512) +
    submit(2, IN, 1, 512) + unlink(3, 1) + unlink(4, 9) + unlink(5, 3),
    "bulk-unlink-data": bytes([5]) + IMPORT + submit(1, IN, 1, 512) +
    unlink(2, 1) + ctrl_in(3),
    "unlink-in-cancel": bytes([2]) + IMPORT + submit(1, IN, 2, 8) +
    unlink(2, 1) + submit(3, IN, 2, 8),
    "pause": bytes([0]) + IMPORT + submit(1, OUT, 2, 8) + ctrl_in(2) +
    submit(3, IN, 1, 64),
    "iso": bytes([0]) + IMPORT +
    submit(1, OUT, 3, 384, npk=2, iso=((0, 192), (192, 192))) +
    submit(2, IN, 3, 384, npk=3, iso=((0, 128), (128, 128), (256, 128))),
    "async-import": bytes([1]) + op(0x8003, "1-2") + ctrl_in(1) +
    submit(2, IN, 1, 64) + unlink(3, 2),
    "double-unlink": bytes([1]) + IMPORT + submit(1, IN, 1, 64) +
    unlink(2, 1) + unlink(3, 1),
    "devid-mismatch": bytes([0]) + IMPORT + ctrl_in(1)[:8] +
    be32(DEVID + 1) + ctrl_in(1)[12:],
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/expsrv"
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
