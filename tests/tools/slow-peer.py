#!/usr/bin/env python3
"""slow-peer.py -- a vhci host that moves data slowly through the gateway.

usage: slow-peer.py MODE ADDR:PORT BUSID [options]

Imports BUSID (a sourcesink device: bulk IN 0x81, bulk OUT 0x01) and then:

  read    keeps --urbs bulk IN URBs of --size bytes in flight and reads
          the socket at --rate bytes per 100 ms (a small receive buffer,
          so the gateway's output backs up) for --seconds, then stops
          reading for good (--stop-seconds) while keeping the socket open;
  trickle sends one bulk OUT URB of --size bytes at --rate bytes per
          100 ms, again and again for --seconds, then stops sending in
          the middle of the next one (--stop-seconds).

One line per phase on stdout, key=value: "PHASE slow ... alive=1" when the
slow phase ended with the connection open (read: with stop_tod, the time
of day it stopped reading, as usbgwd's log writes times); "PHASE stopped
closed=1" when the gateway closed it (trickle: after_ms=N, N ms after the
peer stopped; read: seen when the peer reads again after --stop-seconds,
since a close queued behind unread data shows only then).  Exit 0 when
both lines were printed, 3 on a connection or protocol error.
"""
import argparse
import select
import socket
import struct
import sys
import time

OP_REQ_IMPORT = 0x8003
CMD_SUBMIT, RET_SUBMIT = 1, 3


def tod():
    """The time of day as usbgwd's log writes it (HH:MM:SS.mmm)."""
    t = time.time()
    return time.strftime("%H:%M:%S", time.localtime(t)) + \
        ".%03d" % int((t % 1) * 1000)


def die(msg):
    print("ERROR %s" % msg, flush=True)
    sys.exit(3)


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            die("connection closed during import")
        b += c
    return b


def do_import(addr, busid, rcvbuf):
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((host, int(port)))
    s.sendall(struct.pack(">HHI32s", 0x0111, OP_REQ_IMPORT, 0,
                          busid.encode()))
    hdr = recv_exact(s, 8)
    _, code, st = struct.unpack(">HHI", hdr)
    if st != 0:
        die("import refused, status %d" % st)
    rec = recv_exact(s, 312)
    busnum, devnum = struct.unpack(">II", rec[0x120:0x128])
    s.settimeout(None)
    s.setblocking(False)
    return s, (busnum << 16) | devnum


def submit(seq, devid, direction, ep, length):
    return struct.pack(">IIIII", CMD_SUBMIT, seq, devid, direction, ep) + \
        struct.pack(">iiiii8s", 0, length, 0, 0, 0, b"\0" * 8)


def closed_now(s):
    """True if the peer closed (EOF or reset): peek without consuming."""
    try:
        b = s.recv(1, socket.MSG_PEEK)
        return b == b""
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def send_all(s, data, deadline):
    while data:
        try:
            n = s.send(data)
            data = data[n:]
        except BlockingIOError:
            if time.monotonic() > deadline:
                return data
            select.select([], [s], [], 0.05)
        except (ConnectionResetError, BrokenPipeError):
            return data or b"x"
    return b""


def wait_closed(s, seconds, drain):
    """Until the gateway closes s (reading nothing unless drain)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if drain:
            try:
                while True:
                    if s.recv(1 << 20) == b"":
                        return time.monotonic() - t0
            except BlockingIOError:
                pass
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - t0
        elif closed_now(s):
            return time.monotonic() - t0
        time.sleep(0.01 if drain else 0.05)
    return None


def mode_read(a):
    s, devid = do_import(a.addr, a.busid, 16384)
    seq = 1
    pending = b""
    for _ in range(a.urbs):
        pending += submit(seq, devid, 1, 1, a.size)
        seq += 1
    inflight = a.urbs
    rx = 0          # bytes read since the last complete reply
    pdu = 48 + a.size
    total = 0
    t0 = time.monotonic()
    next_tick = t0
    while time.monotonic() - t0 < a.seconds:
        pending = send_all(s, pending, time.monotonic() + 0.01)
        now = time.monotonic()
        if now < next_tick:
            time.sleep(next_tick - now)
        next_tick += 0.1
        want = a.rate
        while want > 0:
            try:
                b = s.recv(min(want, 65536))
            except BlockingIOError:
                break
            except ConnectionResetError:
                b = b""
            if not b:
                print("PHASE slow alive=0 seconds=%.1f bytes=%d" %
                      (time.monotonic() - t0, total), flush=True)
                return 0
            want -= len(b)
            rx += len(b)
            total += len(b)
        while rx >= pdu:        # sourcesink fills every IN URB
            rx -= pdu
            inflight -= 1
        while inflight < a.urbs:
            pending += submit(seq, devid, 1, 1, a.size)
            seq += 1
            inflight += 1
    el = time.monotonic() - t0
    # Still open?  What the gateway sent may be unread: only a read to
    # the end can see its close, so the test times it from the log.
    print("PHASE slow alive=%d seconds=%.1f bytes=%d rate_kbs=%.0f "
          "stop_tod=%s" % (0 if closed_now(s) else 1, el, total,
                           total / el / 1024, tod()), flush=True)
    time.sleep(a.stop_seconds)
    after = wait_closed(s, 5, True)
    print("PHASE stopped closed=%d" % (after is not None), flush=True)
    return 0


def mode_trickle(a):
    s, devid = do_import(a.addr, a.busid, 0)
    seq = 1
    sent = 0
    t0 = time.monotonic()
    next_tick = t0
    alive = True
    while alive and time.monotonic() - t0 < a.seconds:
        pdu = submit(seq, devid, 0, 1, a.size) + b"\x5a" * a.size
        seq += 1
        while pdu:
            now = time.monotonic()
            if now < next_tick:
                time.sleep(next_tick - now)
            next_tick += 0.1
            chunk, pdu = pdu[:a.rate], pdu[a.rate:]
            if send_all(s, chunk, time.monotonic() + 1) or closed_now(s):
                alive = False
                break
            sent += len(chunk)
            # replies (RET_SUBMIT, 48 bytes each) are read and dropped
            try:
                while s.recv(65536):
                    pass
            except BlockingIOError:
                pass
            except ConnectionResetError:
                alive = False
                break
    el = time.monotonic() - t0
    print("PHASE slow alive=%d seconds=%.1f bytes=%d urbs=%d" %
          (1 if alive and not closed_now(s) else 0, el, sent, seq - 1),
          flush=True)
    if not alive:
        return 0
    # the next URB: its header and half its data, then nothing
    half = submit(seq, devid, 0, 1, a.size) + b"\x5a" * (a.size // 2)
    send_all(s, half, time.monotonic() + 1)
    after = wait_closed(s, a.stop_seconds, True)
    print("PHASE stopped closed=%d after_ms=%d" %
          (after is not None, int((after or 0) * 1000)), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["read", "trickle"])
    p.add_argument("addr")
    p.add_argument("busid")
    p.add_argument("--size", type=int, default=65536)
    p.add_argument("--urbs", type=int, default=256)
    p.add_argument("--rate", type=int, default=256 * 1024,
                   help="bytes per 100 ms")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--stop-seconds", type=float, default=10)
    a = p.parse_args()
    return mode_read(a) if a.mode == "read" else mode_trickle(a)


if __name__ == "__main__":
    sys.exit(main())
