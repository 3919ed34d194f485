#!/usr/bin/env python3
"""gw-evil.py: a hostile gateway for usbgw-agent's control connections
(client/agent/ctlconn.c, protocol.md 1.9.4).  Python 3, stdlib only.

    gw-evil.py [--agent PORT] SCENARIO PORTFILE [ARGS]

Dial-out (the default): listens on 127.0.0.1 (an ephemeral port,
written to PORTFILE) and admits the first agent's CONTROL (ST_OK).
Listen mode (--agent PORT): connects to the agent's USB/IP listener on
127.0.0.1:PORT as a gateway and sends CONTROL (PORTFILE is written
once the agent answered ST_OK).  Then it misbehaves:

  pingflood N   N PINGs, in order, as fast as the agent takes them
                (for at most $GW_EVIL_SECS, 90 s), and never a byte
                read: the agent's PONGs have nowhere to go.  Prints
                "RESULT sent=N" and "RESULT closed=0|1" (did the agent
                end the connection, before or within 3 s after?).
  idle          admitted, reads (answers PINGs) until the agent closes;
                prints "RESULT closed=1" then.
"""
import os
import select
import socket
import struct
import sys
import time

V = 0x0111
REQ = 0x8067
REP = 0x0067
OPEN_IMPORT, OPEN_FAILED, PING, PONG = 5, 6, 7, 8


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def write_portfile(portfile, port):
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(portfile + ".tmp", portfile)


def admit_dialout(portfile):
    ls = socket.socket()
    # a small window from the start (an accepted socket inherits it):
    # what the agent owes piles up in the agent, not in the kernel
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    write_portfile(portfile, ls.getsockname()[1])
    s, _ = ls.accept()
    hdr = recv_exact(s, 16)
    recv_exact(s, struct.unpack(">I", hdr[12:16])[0])
    body = b"usbgwd".ljust(32, b"\0") + struct.pack(">IH", 0, 15)
    s.sendall(struct.pack(">HHIHHI", V, REP, 0, 1, 1, len(body)) + body)
    return s, ls


def admit_listen(portfile, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    body = b"usbgwd".ljust(32, b"\0") + struct.pack(">I", 0) + bytes(16)
    s.sendall(struct.pack(">HHIHHI", V, REQ, 0, 1, 1, len(body)) + body)
    hdr = recv_exact(s, 16)
    st = struct.unpack(">I", hdr[4:8])[0]
    recv_exact(s, struct.unpack(">I", hdr[12:16])[0])
    if st != 0:
        print("RESULT refused=%d" % st, flush=True)
        sys.exit(1)
    s.settimeout(None)
    write_portfile(portfile, port)
    return s, None


def read_msg(s):
    n = struct.unpack(">I", recv_exact(s, 4))[0]
    b = recv_exact(s, n)
    return struct.unpack(">H", b[0:2])[0], b


def pingflood(s, n):
    """N PINGs as fast as the agent takes them, never a byte read, for at
    most GW_EVIL_SECS (90) seconds or until a send fails."""
    s.setblocking(False)
    deadline = time.time() + float(os.environ.get("GW_EVIL_SECS", "90"))
    seq = 0
    pending = b""
    closed = 0
    while time.time() < deadline:
        if not pending and seq < n:
            k = min(4096, n - seq)
            pending = b"".join(struct.pack(">IHHIQ", 16, PING, 0,
                                           seq + i + 1, 0) for i in range(k))
            seq += k
        if not pending:
            break
        select.select([], [s], [], 0.5)
        try:
            pending = pending[s.send(pending):]
        except BlockingIOError:
            pass
        except OSError:
            closed = 1
            break
    print("RESULT sent=%d" % (seq - len(pending) // 20), flush=True)
    if not closed:
        time.sleep(3)
        # closed if a send now fails (the agent reset or closed it)
        try:
            s.setblocking(True)
            s.settimeout(1)
            s.sendall(struct.pack(">IHHIQ", 16, PING, 0, seq + 1, 0))
            time.sleep(0.2)
            s.sendall(struct.pack(">IHHIQ", 16, PING, 0, seq + 2, 0))
        except (OSError, socket.timeout):
            closed = 1
    print("RESULT closed=%d" % closed, flush=True)


def idle(s):
    seq = 0
    try:
        while True:
            t, b = read_msg(s)
            if t == PING:
                seq += 1
                s.sendall(struct.pack(">IHHI", 16, PONG, 0, seq) + b[8:16])
    except (EOFError, OSError):
        pass
    print("RESULT closed=1", flush=True)


def main():
    args = sys.argv[1:]
    agent = None
    if args[:1] == ["--agent"]:
        agent = int(args[1])
        args = args[2:]
    sc, portfile = args[0], args[1]
    if agent is None:
        s, ls = admit_dialout(portfile)
    else:
        s, ls = admit_listen(portfile, agent)
    print("RESULT admitted=1", flush=True)
    if sc == "pingflood":
        pingflood(s, int(args[2]))
    elif sc == "idle":
        idle(s)
    else:
        sys.exit("unknown scenario " + sc)


if __name__ == "__main__":
    main()
