#!/usr/bin/env python3
"""gw-evil.py: a hostile gateway for usbgw-agent's dial-out control
connection (client/agent/ctlconn.c, protocol.md 1.9.4).  Python 3,
stdlib only.

    gw-evil.py SCENARIO PORTFILE

Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE), admits
the first agent's CONTROL (ST_OK) and misbehaves:

  pingflood N   N PINGs, in order, and never a byte read: the agent's
                PONGs have nowhere to go.  Prints "RESULT sent=N" and,
                after the agent had 3 s to react, "RESULT closed=0|1"
                (did the agent end the connection?).
"""
import socket
import struct
import sys
import time

V = 0x0111
REP = 0x0067
PING = 7


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def main():
    sc, portfile = sys.argv[1], sys.argv[2]
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    import os
    os.rename(portfile + ".tmp", portfile)
    s, _ = ls.accept()
    hdr = recv_exact(s, 16)
    recv_exact(s, struct.unpack(">I", hdr[12:16])[0])
    body = b"usbgwd".ljust(32, b"\0") + struct.pack(">IH", 0, 15)
    s.sendall(struct.pack(">HHIHHI", V, REP, 0, 1, 1, len(body)) + body)
    print("RESULT admitted=1", flush=True)
    if sc == "pingflood":
        n = int(sys.argv[3])
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        seq = 0
        sent = 0
        s.settimeout(10)
        try:
            while sent < n:
                k = min(65536, n - sent)
                buf = b"".join(struct.pack(">IHHIQ", 16, PING, 0,
                                           seq + i + 1, 0)
                               for i in range(k))
                s.sendall(buf)
                seq += k
                sent += k
        except (OSError, socket.timeout):
            pass
        print("RESULT sent=%d" % sent, flush=True)
        time.sleep(3)
        # closed if a send now fails (the agent reset or closed it)
        closed = 0
        try:
            s.settimeout(1)
            s.sendall(struct.pack(">IHHIQ", 16, PING, 0, seq + 1, 0))
            time.sleep(0.2)
            s.sendall(struct.pack(">IHHIQ", 16, PING, 0, seq + 2, 0))
        except (OSError, socket.timeout):
            closed = 1
        print("RESULT closed=%d" % closed, flush=True)


if __name__ == "__main__":
    main()
