#!/usr/bin/env python3
"""A hostile or slow exporter in front of a real one (tests only).

    slow-exporter.py LISTEN_PORT_FILE UPSTREAM_PORT MODE_FILE

Listens on 127.0.0.1 (a free port, written to LISTEN_PORT_FILE) and
relays every connection to 127.0.0.1:UPSTREAM_PORT, byte for byte.  A
device-list request (OP_REQ_DEVLIST) is treated as MODE_FILE says at
the time it arrives:

    pass      relayed like everything else
    hang      read and never answered (the connection stays open)
    garbage   answered with bytes that are no OP_REP_DEVLIST
    close     the connection is closed at once

Imports (the gateway's claims) are relayed, except in mode

    dribble   an import's replies reach the gateway one byte every 0.3 s
              (an exporter that keeps an inactivity timeout from ever
              firing); device lists are relayed

as the mode is when the import arrives.
"""
import time
import os
import socket
import sys
import threading

OP_REQ_DEVLIST = 0x8005


def mode(path):
    try:
        with open(path) as f:
            return f.read().strip() or "pass"
    except OSError:
        return "pass"


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            return buf
        buf += b
    return buf


def pump(src, dst, dribble=False):
    """src to dst until either closes; dribble: one byte every 0.3 s."""
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            if not dribble:
                dst.sendall(b)
                continue
            for i in range(len(b)):
                dst.sendall(b[i:i + 1])
                time.sleep(0.3)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(c, upstream, mode_file, hung):
    hdr = recv_exact(c, 8)
    if len(hdr) < 8:
        c.close()
        return
    code = int.from_bytes(hdr[2:4], "big")
    if code == OP_REQ_DEVLIST:
        m = mode(mode_file)
        if m == "hang":
            hung.append(c)          # keep it open, answer nothing
            return
        if m == "garbage":
            c.sendall(b"\x01\x11\x00\x03\x00\x00\x00\x07" + b"\xff" * 64)
            c.close()
            return
        if m == "close":
            c.close()
            return
    try:
        u = socket.create_connection(("127.0.0.1", upstream))
    except OSError:
        c.close()
        return
    u.sendall(hdr)
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    pump(u, c, code != OP_REQ_DEVLIST and mode(mode_file) == "dribble")


def main():
    port_file, upstream, mode_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(tmp, port_file)
    hung = []
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, upstream, mode_file, hung),
                         daemon=True).start()


if __name__ == "__main__":
    main()
