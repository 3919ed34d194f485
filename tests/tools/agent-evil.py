#!/usr/bin/env python3
"""agent-evil.py: a hostile dial-out agent for the gateway's side of the
extension (protocol.md 1.9.4).  Python 3, stdlib only.

    agent-evil.py SCENARIO GATEWAY_HOST:PORT [--name NAME]

Each scenario connects, sends CONTROL as NAME (default tc66), misbehaves
and prints what it saw as "RESULT key=value" lines:

  oversized   a message of length 5000        -> closed
  unknown     a message of type 42            -> closed
  badseq      a first message with seq 7      -> closed
  snaplie     SNAPSHOT_BEGIN 2, one DEV_ADDED -> closed
  flood       3000 PINGs at once: PONGs counted in the first 2 s
  lie         DEV_ADDED 7-7 (it has no such device); OPEN_FAILED ST_NODEV
  tokens      forged token; a good token used, then replayed; a token
              for 7-7 used for 7-8; a token used after 11 s (expired)
  version     a CONTROL hello of extension version 9
  hog         300 connections from --source (default 127.0.0.2) that
              start a hello and stall; then this agent's CONTROL
              (from 127.0.0.1): admitted or not, and how many of the
              stalled ones the gateway still holds open
"""
import os
import socket
import struct
import sys
import time

V = 0x0111
REQ, REP = 0x8067, 0x0067
(SB, SE, ADDED, REMOVED, OPEN_IMPORT, OPEN_FAILED, PING, PONG,
 BYE) = range(1, 10)


def pad(s, n):
    return s.encode()[:n - 1].ljust(n, b"\0")


def result(k, v):
    print("RESULT %s=%s" % (k, v), flush=True)


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def closed_within(s, secs):
    """True if the peer closes s within secs (data read and dropped)."""
    s.settimeout(secs)
    end = time.monotonic() + secs
    try:
        while time.monotonic() < end:
            if not s.recv(65536):
                return True
    except socket.timeout:
        return False
    except OSError:
        return True
    return False


def record(busid):
    r = pad("/sys/devices/evil/" + busid, 256) + pad(busid, 32)
    return r + struct.pack(">IIIHHHBBBBBB", 7, 7, 3, 0x1209, 0x0001, 1,
                           0, 0, 0, 1, 1, 1) + bytes([3, 1, 1, 0])


class Agent:
    def __init__(self, gw, name):
        self.gw = gw
        self.s = socket.create_connection(gw, timeout=5)
        self.seq = 0
        body = pad(name, 32) + struct.pack(">I", 0) + os.urandom(16)
        self.s.sendall(struct.pack(">HHIHHI", V, REQ, 0, 1, 1, len(body))
                       + body)
        rep = recv_exact(self.s, 16)
        st, _, _, ln = struct.unpack(">IHHI", rep[4:16])
        recv_exact(self.s, ln)
        self.ok = st == 0

    def send(self, t, body=b"", seq=None, length=None):
        self.seq += 1
        ln = 8 + len(body) if length is None else length
        self.s.sendall(struct.pack(">IHHI", ln, t, 0,
                                   self.seq if seq is None else seq) + body)

    def msg(self, timeout=5):
        self.s.settimeout(timeout)
        ln, t, _, _ = struct.unpack(">IHHI", recv_exact(self.s, 12))
        return t, recv_exact(self.s, ln - 8)

    def wait_open(self, timeout=5):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            t, body = self.msg(end - time.monotonic())
            if t == OPEN_IMPORT:
                return body[:32].split(b"\0")[0].decode(), body[32:48]
            if t == PING:
                self.send(PONG, body)
        raise EOFError("no OPEN_IMPORT")


def dialback(gw, token, busid):
    """DIALBACK; the reply's status, or 'closed'."""
    s = socket.create_connection(gw, timeout=5)
    body = token + pad(busid, 32)
    s.sendall(struct.pack(">HHIHHI", V, REQ, 0, 1, 2, len(body)) + body)
    try:
        rep = recv_exact(s, 16)
    except (EOFError, OSError):
        return "closed", s
    return struct.unpack(">I", rep[4:8])[0], s


def main():
    sc, gws = sys.argv[1], sys.argv[2]
    opts = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    name = opts.get("--name", "tc66")
    h, p = gws.rsplit(":", 1)
    gw = (h, int(p))
    if sc == "version":
        s = socket.create_connection(gw, timeout=5)
        body = pad(name, 32) + bytes(20)
        s.sendall(struct.pack(">HHIHHI", V, REQ, 0, 9, 1, len(body)) + body)
        rep = recv_exact(s, 16)
        st, ext = struct.unpack(">IH", rep[4:10])
        result("status", st)
        result("ext_version", ext)
        return
    if sc == "hog":
        hogs = []
        for _ in range(300):
            s = socket.socket()
            s.bind((opts.get("--source", "127.0.0.2"), 0))
            s.connect(gw)
            # the op header of an extension hello, and nothing more
            s.sendall(struct.pack(">HHI", V, REQ, 0))
            hogs.append(s)
            # paced: the listener lets 16 requests from one address be
            # in progress, and hands each hello over at its 4th byte
            time.sleep(0.01)
        time.sleep(0.5)
        try:
            a = Agent(gw, name)
            result("admitted", int(a.ok))
        except (EOFError, OSError):
            result("admitted", 0)
        n = 0
        for s in hogs:
            s.setblocking(False)
            try:
                if s.recv(64) == b"":
                    n += 1
            except BlockingIOError:
                pass
            except OSError:
                n += 1
        result("hogs_open", len(hogs) - n)
        return
    a = Agent(gw, name)
    result("admitted", int(a.ok))
    if sc == "oversized":
        a.send(PING, bytes(8), length=5000)
        result("closed", int(closed_within(a.s, 5)))
    elif sc == "unknown":
        a.send(42, b"")
        result("closed", int(closed_within(a.s, 5)))
    elif sc == "badseq":
        a.send(PING, bytes(8), seq=7)
        result("closed", int(closed_within(a.s, 5)))
    elif sc == "snaplie":
        a.send(SB, struct.pack(">I", 2))
        a.send(ADDED, record("7-1"))
        a.send(SE)
        result("closed", int(closed_within(a.s, 5)))
    elif sc == "flood":
        buf = b""
        for i in range(3000):
            a.seq += 1
            buf += struct.pack(">IHHIQ", 16, PING, 0, a.seq, i)
        t0 = time.monotonic()
        a.s.sendall(buf)
        n = 0
        a.s.settimeout(0.2)
        while time.monotonic() - t0 < 2.0:
            try:
                t, _ = a.msg(0.2)
                if t == PONG:
                    n += 1
            except socket.timeout:
                pass
            except (EOFError, OSError):
                break
        result("pongs_2s", n)
        result("closed", int(closed_within(a.s, 0.5)))
    elif sc == "lie":
        a.send(SB, struct.pack(">I", 1))
        a.send(ADDED, record("7-7"))
        a.send(SE)
        busid, tok = a.wait_open()
        result("open_import", busid)
        a.send(OPEN_FAILED, tok + struct.pack(">I", 4))
        time.sleep(1)
        result("closed", int(closed_within(a.s, 0.5)))
    elif sc == "tokens":
        st, _ = dialback(gw, os.urandom(16), "7-7")
        result("forged", st)
        a.send(SB, struct.pack(">I", 1))
        a.send(ADDED, record("7-7"))
        a.send(SE)
        busid, tok = a.wait_open()
        st, s = dialback(gw, tok, "7-7")
        result("good", st)
        s.close()       # the claim fails: a new OPEN_IMPORT follows
        st, _ = dialback(gw, tok, "7-7")
        result("replayed", st)
        busid, tok2 = a.wait_open()
        st, _ = dialback(gw, tok2, "7-8")
        result("other_busid", st)
        busid, tok3 = a.wait_open(10)
        end = time.monotonic() + 11
        while time.monotonic() < end:      # keep the control alive
            try:
                t, body = a.msg(max(0.1, end - time.monotonic()))
                if t == PING:
                    a.send(PONG, body)
            except socket.timeout:
                pass
        st, _ = dialback(gw, tok3, "7-7")
        result("expired", st)


if __name__ == "__main__":
    main()
