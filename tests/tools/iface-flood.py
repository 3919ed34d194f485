#!/usr/bin/env python3
"""iface-flood: a vhci host that floods the gateway with URBs it refuses.

    iface-flood.py HOST PORT BUSID EP COUNT [GOFILE]

Imports BUSID, then sends COUNT CMD_SUBMIT bulk IN URBs to endpoint EP
without reading a byte, until the socket takes no more for a second
(the gateway stopped reading it); prints "stopped_at=BYTES" (what it had
sent by then) and, given GOFILE, waits until that file exists (30 s at
most).  Then it reads while it sends the rest, checks that every
answer is a RET_SUBMIT -EPIPE of one of its seqnums, in order, and
prints "answered=N epipe=N".  Exit status 0 when all COUNT were answered
with -EPIPE, 1 otherwise, 2 on a usage or import error.
"""
import os
import select
import socket
import struct
import sys
import time


def main():
    if len(sys.argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        return 2
    host, port, busid, ep, count = (sys.argv[1], int(sys.argv[2]),
                                    sys.argv[3], int(sys.argv[4]),
                                    int(sys.argv[5]))
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(struct.pack(">HHI", 0x0111, 0x8003, 0) +
              busid.encode().ljust(32, b"\0"))
    rep = b""
    while len(rep) < 8 + 312:
        b = s.recv(8 + 312 - len(rep))
        if not b:
            print("import: closed after %d bytes" % len(rep))
            return 2
        rep += b
    if struct.unpack(">I", rep[4:8])[0] != 0:
        print("import: status %d" % struct.unpack(">I", rep[4:8])[0])
        return 2
    busnum, devnum = struct.unpack(">II", rep[8 + 288:8 + 296])
    devid = busnum << 16 | devnum
    urbs = b"".join(struct.pack(">IIIII", 1, 1000 + i, devid, 1, ep) +
                    struct.pack(">IiiiI", 0, 512, 0, 0, 0) + b"\0" * 8
                    for i in range(count))
    s.setblocking(False)
    sent, last = 0, time.monotonic()
    while sent < len(urbs) and time.monotonic() - last < 1.0:
        try:
            n = s.send(urbs[sent:sent + 65536])
            sent += n
            last = time.monotonic()
        except BlockingIOError:
            time.sleep(0.01)
    print("stopped_at=%d of %d" % (sent, len(urbs)), flush=True)
    if len(sys.argv) == 7:
        until = time.monotonic() + 30
        while not os.path.exists(sys.argv[6]) and time.monotonic() < until:
            time.sleep(0.05)
    got = bytearray()
    deadline = time.monotonic() + 120
    want = 48 * count
    while len(got) < want and time.monotonic() < deadline:
        w = [s] if sent < len(urbs) else []
        r, wr, _ = select.select([s], w, [], 1.0)
        if r:
            b = s.recv(1 << 20)
            if not b:
                print("closed after %d answers" % (len(got) // 48))
                break
            got += b
        if wr:
            try:
                sent += s.send(urbs[sent:sent + 65536])
            except BlockingIOError:
                pass
    answered = len(got) // 48
    epipe = 0
    for i in range(answered):
        cmd, seq = struct.unpack(">II", got[48 * i:48 * i + 8])
        status, = struct.unpack(">i", got[48 * i + 20:48 * i + 24])
        if cmd == 3 and seq == 1000 + i and status == -32:
            epipe += 1
    print("answered=%d epipe=%d" % (answered, epipe))
    s.close()
    return 0 if answered == count and epipe == count else 1


if __name__ == "__main__":
    sys.exit(main())
