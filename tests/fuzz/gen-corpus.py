#!/usr/bin/env python3
"""Write the seed corpus of the USB/IP codec fuzzers.

    tests/fuzz/gen-corpus.py [tests/fuzz/corpus]

Writes valid PDUs of every kind (and a few near misses) in the input
format of fuzz_usbip_op.c and fuzz_usbip_urb.c; see the comment at the top
of each harness.  The PDUs are packed here with struct, independently of
the codec.  Files named regress-* are crash reproducers found by fuzzing;
this script leaves them alone.
"""
import os
import struct
import sys

VERSION = 0x0111
OP_REQ_DEVLIST, OP_REP_DEVLIST = 0x8005, 0x0005
OP_REQ_IMPORT, OP_REP_IMPORT = 0x8003, 0x0003
CMD_SUBMIT, CMD_UNLINK, RET_SUBMIT, RET_UNLINK = 1, 2, 3, 4
DEVID = (1 << 16) | 2

FROM_CLIENT, FROM_SERVER = 0, 1
EP_ISO_UNKNOWN, EP_ISO_NO, EP_ISO_YES = 0, 1 << 1, 2 << 1
UNKNOWN_SEQNUM = 1 << 3


def be32(*v):
    return b"".join(struct.pack(">I", x & 0xffffffff) for x in v)


def op_hdr(code, status=0, version=VERSION):
    return struct.pack(">HHI", version, code, status)


def fixed(s, size):
    b = s.encode()
    assert len(b) <= size
    return b + bytes(size - len(b))


def dev(busid, nintf, speed=3, vid=0x1d6b, pid=0x0104, cls=0):
    path = "/sys/devices/platform/usbgw-sim/usb1/" + busid
    return (fixed(path, 256) + fixed(busid, 32) +
            be32(1, 2, speed) + struct.pack(">HHH", vid, pid, 0x0100) +
            bytes([cls, 0, 0, 1, 1, nintf]))


def intf(cls, sub, proto):
    return bytes([cls, sub, proto, 0])


def op_seeds():
    kbd = dev("1-1", 1, speed=2, vid=0x046d, pid=0xc31c) + intf(3, 1, 1)
    msc = dev("1-2", 1, speed=3, vid=0x0781, pid=0x5567) + intf(8, 6, 0x50)
    comp = (dev("1-3", 3, vid=0x1234, pid=0x5678, cls=0xef) +
            intf(3, 1, 1) + intf(8, 6, 0x50) + intf(0xff, 0xff, 0xff))
    c, s = bytes([FROM_CLIENT]), bytes([FROM_SERVER])
    yield "client-req-devlist", c + op_hdr(OP_REQ_DEVLIST)
    yield "client-req-import", c + op_hdr(OP_REQ_IMPORT) + fixed("1-1", 32)
    yield "client-req-import-31", c + op_hdr(OP_REQ_IMPORT) + \
        fixed("1" * 31, 32)
    yield "client-req-import-nonul", c + op_hdr(OP_REQ_IMPORT) + b"1" * 32
    yield "client-bad-version", c + op_hdr(OP_REQ_DEVLIST, version=0x0110)
    yield "server-rep-devlist-0", s + op_hdr(OP_REP_DEVLIST) + be32(0)
    yield "server-rep-devlist-1", s + op_hdr(OP_REP_DEVLIST) + be32(1) + kbd
    yield "server-rep-devlist-3", s + op_hdr(OP_REP_DEVLIST) + be32(3) + \
        kbd + msc + comp
    yield "server-rep-devlist-err", s + op_hdr(OP_REP_DEVLIST, 1)
    yield "server-rep-devlist-huge", s + op_hdr(OP_REP_DEVLIST) + \
        be32(0xffffffff)
    yield "server-rep-devlist-32intf", s + op_hdr(OP_REP_DEVLIST) + \
        be32(1) + dev("2-1", 32) + b"".join(intf(i, i, i) for i in range(32))
    yield "server-rep-import-ok", s + op_hdr(OP_REP_IMPORT) + \
        dev("1-1", 0, speed=2)
    yield "server-rep-import-busy", s + op_hdr(OP_REP_IMPORT, 2)
    yield "server-rep-import-nodev", s + op_hdr(OP_REP_IMPORT, 4)
    yield "server-rep-import-na", s + op_hdr(OP_REP_IMPORT, 1)


def submit(seq, direction, ep, tbl, np=0, flags=0, interval=0,
           setup=bytes(8), start_frame=0):
    return (be32(CMD_SUBMIT, seq, DEVID, direction, ep) +
            be32(flags, tbl, start_frame, np, interval) + setup)


def ret(seq, status, actual, np=0, errors=0, start_frame=0):
    return (be32(RET_SUBMIT, seq, 0, 0, 0) +
            be32(status, actual, start_frame, np, errors) + bytes(8))


def unlink(seq, victim):
    return be32(CMD_UNLINK, seq, DEVID, 0, 0, victim) + bytes(24)


def ret_unlink(seq, status):
    return be32(RET_UNLINK, seq, 0, 0, 0, status) + bytes(24)


def iso(offset, length, actual=0, status=0):
    return be32(offset, length, actual, status)


def req(direction, length, npackets=0, is_iso=False):
    """The 7-byte request a server-side input starts with."""
    flags = direction | (2 if is_iso else 0)
    return bytes([flags]) + be32(length) + struct.pack(">H", npackets)


def urb_seeds():
    get_desc = bytes([0x80, 6, 0, 1, 0, 0, 0x12, 0])
    set_conf = bytes([0, 9, 1, 0, 0, 0, 0, 0])
    data64 = bytes(range(64))
    c = bytes([FROM_CLIENT | EP_ISO_UNKNOWN])
    c_no = bytes([FROM_CLIENT | EP_ISO_NO])
    c_yes = bytes([FROM_CLIENT | EP_ISO_YES])
    s = bytes([FROM_SERVER])

    yield "client-ctrl-in", c + submit(1, 1, 0, 18, flags=0x200,
                                       setup=get_desc)
    yield "client-ctrl-out", c + submit(2, 0, 0, 0, setup=set_conf)
    yield "client-bulk-out", c_no + submit(3, 0, 2, 64, np=0xffffffff) + \
        data64
    yield "client-bulk-in", c_no + submit(4, 1, 1, 512, flags=0x200)
    yield "client-intr-in", c + submit(5, 1, 3, 8, flags=0x200, interval=10)
    yield "client-iso-out", c_yes + submit(6, 0, 5, 96, np=3, flags=2,
                                           interval=1) + bytes(96) + \
        iso(0, 32) + iso(32, 32) + iso(64, 32)
    yield "client-iso-in", c + submit(7, 1, 6, 128, np=4, flags=0x202,
                                      interval=1) + \
        b"".join(iso(i * 32, 32) for i in range(4))
    yield "client-iso-wrap", c + submit(8, 1, 6, 1024, np=1) + \
        iso(0xffffff00, 0x200)
    # The most packets the codec allows; also lifts libFuzzer's default
    # input size limit (the largest seed) above 16 KiB.
    yield "client-iso-in-1024", c + submit(14, 1, 6, 8192, np=1024) + \
        b"".join(iso(i * 8, 8) for i in range(1024))
    yield "client-unlink", c + unlink(9, 7)
    yield "client-stream", c + submit(10, 0, 2, 4, np=0) + b"abcd" + \
        submit(11, 1, 1, 64, flags=0x200) + unlink(12, 11)
    yield "client-bad-ep", c + submit(13, 1, 16, 8)

    yield "server-ret-in", s + req(1, 64) + ret(1, 0, 18) + data64[:18]
    yield "server-ret-in-npwin", s + req(1, 64) + \
        ret(1, 0, 64, np=0xffffffff) + data64
    yield "server-ret-out", s + req(0, 512) + ret(2, 0, 512)
    yield "server-ret-error", s + req(1, 512) + ret(3, -32 & 0xffffffff, 0)
    yield "server-ret-iso-in", s + req(1, 128, 4, True) + \
        ret(4, 0, 50, np=4, errors=1) + bytes(50) + \
        iso(0, 32, 32) + iso(32, 32, 0, -18 & 0xffffffff) + \
        iso(64, 32, 10) + iso(96, 32, 8)
    yield "server-ret-iso-out", s + req(0, 96, 3, True) + \
        ret(5, 0, 96, np=3) + iso(0, 32, 32) + iso(32, 32, 32) + \
        iso(64, 32, 32)
    yield "server-ret-iso-in-1024", s + req(1, 8192, 1024, True) + \
        ret(15, 0, 1024, np=1024) + bytes(1024) + \
        b"".join(iso(i * 8, 8, 1) for i in range(1024))
    yield "server-ret-unlink-reset", s + req(1, 8) + \
        ret_unlink(6, -104 & 0xffffffff)
    yield "server-ret-unlink-0", s + req(1, 8) + ret_unlink(7, 0)
    yield "server-ret-unknown", bytes([FROM_SERVER | UNKNOWN_SEQNUM]) + \
        req(1, 8) + ret(8, 0, 0)
    yield "server-stream", s + req(1, 64) + ret(9, 0, 4) + b"wxyz" + \
        ret_unlink(10, 0) + ret(11, 0, 0)
    yield "server-ret-toolong", s + req(1, 8) + ret(12, 0, 9) + bytes(9)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for name, seeds in (("usbip_op", op_seeds()), ("usbip_urb", urb_seeds())):
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        for fname, data in seeds:
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
