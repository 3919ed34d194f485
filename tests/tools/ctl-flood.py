#!/usr/bin/env python3
"""ctl-flood.py -- many requests to usbgwd's control socket, fast.

usage: ctl-flood.py SOCKET connect N    N connections, each one hello
       ctl-flood.py SOCKET command N CMD
                                        one connection, N requests CMD
                                        (args {"busid": "x"})

Prints one line: "RESULT sent=N ok=A refused=R limit=L other=O closed=C"
(closed: connections the daemon closed before answering).  Exit 0.
"""
import json
import socket
import struct
import sys


def frame(obj):
    b = json.dumps(obj).encode()
    return struct.pack(">I", len(b)) + b


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def recv_msg(s):
    h = recv_exact(s, 4)
    if h is None:
        return None
    b = recv_exact(s, struct.unpack(">I", h)[0])
    return None if b is None else json.loads(b)


def classify(m, counts):
    if m is None:
        counts["closed"] += 1
    elif m.get("ok"):
        counts["ok"] += 1
    else:
        code = (m.get("error") or {}).get("code")
        key = code if code in ("refused", "limit") else "other"
        counts[key] += 1


def main():
    path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    counts = dict(ok=0, refused=0, limit=0, other=0, closed=0)
    if mode == "connect":
        for i in range(n):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(path)
            # (a refused peer gets its error unasked; a hello sent too
            # would be unread when the daemon closes, and a Unix socket
            # closed with unread input resets, losing the error)
            try:
                s.settimeout(1)
                try:
                    m = recv_msg(s)
                except socket.timeout:
                    s.settimeout(10)
                    s.sendall(frame({"v": 1, "id": 1, "cmd": "hello"}))
                    m = recv_msg(s)
                classify(m, counts)
            except OSError:
                counts["closed"] += 1
            s.close()
    else:
        cmd = sys.argv[4]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        for i in range(n):
            s.sendall(frame({"v": 1, "id": i + 1, "cmd": cmd,
                             "args": {"busid": "x"}}))
            m = recv_msg(s)
            classify(m, counts)
            if m is None:
                break
        s.close()
    print("RESULT sent=%d %s" % (n, " ".join("%s=%d" % kv
                                               for kv in counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
