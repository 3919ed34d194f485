#!/usr/bin/env python3
"""follow-peer.py: both ends of usbgw's follow subscription (protocol.md
1.10.8), byte by byte, for tests/integration/117-follow-bounds.t.

  follow-peer.py sub HOST:PORT [--hold N] [--pong-first] [--version V]
      Subscribe (a vhci host's side) and print what comes back, one line a
      PDU: "reply status=S host=H heartbeat=B", "msg TYPE seq=N ...".
      --hold N: keep reading N seconds (answering PINGs), then close.
      --pong-first: send an unsolicited PONG after the hello.
      --version V: send ext_version V.
      Exits 0 when the gateway closed the connection or the hold ended.

  follow-peer.py evil PORT SCRIPT
      A hostile gateway on 127.0.0.1:PORT.  Every follow connection gets
      the next scenario of SCRIPT (names separated by commas, the last
      one repeats); every OP_REQ_IMPORT is logged ("import BUSID") and
      refused ST_NA.  Scenarios: badbusid (AUTHORIZED of "a/b"), gap (a
      sequence number skipped), overcount (3 AUTHORIZED in a list of 2),
      dup (a busid twice), good (a list naming evil-1, then silence).
"""
import socket
import struct
import sys
import threading
import time

VER = 0x0111
REQ, REP = 0x8068, 0x0068
T_BEGIN, T_END, T_AUTH, T_WITH, T_PING, T_PONG = 1, 2, 3, 4, 5, 6
NAMES = {1: "LIST_BEGIN", 2: "LIST_END", 3: "AUTHORIZED", 4: "WITHDRAWN",
         5: "PING", 6: "PONG"}


def out(*a):
    print(*a, flush=True)


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def msg(t, seq, body=b""):
    return struct.pack(">IHHI", 8 + len(body), t, 0, seq) + body


def busid(b):
    return b.encode().ljust(32, b"\0")


def sub(addr, args):
    host, port = addr.rsplit(":", 1)
    hold = 2.0
    version = 1
    pong_first = "--pong-first" in args
    if "--hold" in args:
        hold = float(args[args.index("--hold") + 1])
    if "--version" in args:
        version = int(args[args.index("--version") + 1])
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(struct.pack(">HHIHHII", VER, REQ, 0, version, 1, 4, 0))
    if pong_first:
        s.sendall(msg(T_PONG, 1, struct.pack(">Q", 7)))
    h = recv_exact(s, 16)
    if h is None:
        out("closed")
        return 0
    _, code, st, ev, kind, ln = struct.unpack(">HHIHHI", h)
    body = recv_exact(s, ln) if ln else b""
    if st != 0:
        out("reply status=%d" % st)
        return 0
    hb = struct.unpack(">H", body[:2])[0]
    out("reply status=0 host=%s heartbeat=%d" %
        (body[2:].rstrip(b"\0").decode(), hb))
    end = time.time() + hold
    seq = 0
    while time.time() < end:
        s.settimeout(max(0.05, end - time.time()))
        try:
            h = recv_exact(s, 4)
        except socket.timeout:
            break
        if h is None:
            out("closed")
            return 0
        ln = struct.unpack(">I", h)[0]
        rest = recv_exact(s, ln)
        if rest is None:
            out("closed")
            return 0
        t, _, sq = struct.unpack(">HHI", rest[:8])
        b = rest[8:]
        line = "msg %s seq=%d" % (NAMES.get(t, t), sq)
        if t in (T_AUTH, T_WITH):
            line += " busid=" + b[:32].rstrip(b"\0").decode()
        if t == T_WITH:
            line += " reason=%d" % struct.unpack(">I", b[32:36])[0]
        if t == T_BEGIN:
            line += " count=%d" % struct.unpack(">I", b)[0]
        out(line)
        if t == T_PING:
            seq += 1
            s.sendall(msg(T_PONG, seq, b))
    s.close()
    return 0


def scenario(name, c):
    ok = struct.pack(">HHIHHI", VER, REP, 0, 1, 1, 66) + \
        struct.pack(">H", 15) + b"vdi-evil".ljust(64, b"\0")
    c.sendall(ok)
    if name == "badbusid":
        c.sendall(msg(T_BEGIN, 1, struct.pack(">I", 1)) +
                  msg(T_AUTH, 2, busid("a/b")) + msg(T_END, 3))
    elif name == "gap":
        c.sendall(msg(T_BEGIN, 1, struct.pack(">I", 1)) +
                  msg(T_AUTH, 3, busid("evil-2")) + msg(T_END, 4))
    elif name == "overcount":
        c.sendall(msg(T_BEGIN, 1, struct.pack(">I", 2)) +
                  msg(T_AUTH, 2, busid("evil-3")) +
                  msg(T_AUTH, 3, busid("evil-4")) +
                  msg(T_AUTH, 4, busid("evil-5")) + msg(T_END, 5))
    elif name == "dup":
        c.sendall(msg(T_BEGIN, 1, struct.pack(">I", 2)) +
                  msg(T_AUTH, 2, busid("evil-6")) +
                  msg(T_AUTH, 3, busid("evil-6")) + msg(T_END, 4))
    elif name == "good":
        c.sendall(msg(T_BEGIN, 1, struct.pack(">I", 1)) +
                  msg(T_AUTH, 2, busid("evil-1")) + msg(T_END, 3))
    time.sleep(30)


def conn(c, script, n):
    try:
        h = recv_exact(c, 4)
        if h is None:
            return
        code = struct.unpack(">HH", h)[1]
        if code == REQ:
            rest = recv_exact(c, 16)
            name = script[min(n, len(script) - 1)]
            out("follow %s" % name)
            scenario(name, c)
        elif code == 0x8003:
            rest = recv_exact(c, 36)
            b = rest[4:36].rstrip(b"\0").decode("ascii", "replace")
            out("import %s" % b)
            c.sendall(struct.pack(">HHI", VER, 0x0003, 1))
    except OSError:
        pass
    finally:
        c.close()


def evil(port, script):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(port)))
    ls.listen(16)
    out("listening")
    n = 0
    lock = threading.Lock()
    while True:
        c, _ = ls.accept()
        c.settimeout(None)
        # peek at the op code to number follow connections only
        h = c.recv(4, socket.MSG_PEEK)
        k = n
        if len(h) == 4 and struct.unpack(">HH", h)[1] == REQ:
            with lock:
                n += 1
        threading.Thread(target=conn, args=(c, script, k),
                         daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1] == "sub":
        sys.exit(sub(sys.argv[2], sys.argv[3:]))
    evil(sys.argv[2], sys.argv[3].split(","))
