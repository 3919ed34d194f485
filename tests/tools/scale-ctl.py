#!/usr/bin/env python3
"""scale-ctl.py -- drive and time usbgwd's control socket for scale runs.

usage:
  scale-ctl.py SOCKET add PORTSFILE [HOST]
      exporter.add for every "NAME PORT" line of PORTSFILE (usbgw-sim -P),
      pipelined (32 requests in flight on one connection).
      Prints "RESULT added=N failed=F seconds=S".
  scale-ctl.py SOCKET watch EXPECT TIMEOUT [T0 [BUSID]]
      Every 0.1 s, a `status` request on a fresh connection (as `usbgw
      status` makes), timed from connect to reply; stops when the daemon
      counts EXPECT devices pending, or TIMEOUT seconds after T0 (a unix
      time, default now).  A progress line every 5 s on stderr.
      Prints "RESULT reached=0|1 pending_s=S pending=N expected=M
      samples=K p50_ms=.. p99_ms=.. max_ms=.. failed=F max_gone=G"
      (pending_s: from T0 to the first sample counting EXPECT; max_gone:
      most devices seen gone at one sample).  With BUSID, each sample
      also times an operator's `approve` (scope once) and `revoke` of
      that device, each on a fresh connection, and adds "decide_p50_ms=..
      decide_p99_ms=.. decide_max_ms=.. decide_n=N decide_errors=E" (an
      error reply, e.g. while the device is still probing, is an answer:
      timed, and counted in decide_errors; the device ends pending).
  scale-ctl.py SOCKET rest N
      N `status` samples, 0.1 s apart: "RESULT samples=N p50_ms=..
      p99_ms=.. max_ms=.. failed=F".
  scale-ctl.py SOCKET list
      One `list` request, timed: "RESULT devices=N ms=.."
  scale-ctl.py SOCKET list-raw N
      N `list` requests on one connection, each timed from the request to
      the last byte of its reply frame, which is not parsed (the
      gateway's side of `usbgw list`): "RESULT bytes=B median_ms=..
      min_ms=.."; with a 5th argument FILE, the last frame's text is
      saved there.

  scale-ctl.py SOCKET serve FRAMEFILE
      A fake daemon on SOCKET (created) that answers every request with
      the reply frame in FRAMEFILE (as list-raw -o saved it), its "id"
      replaced by the request's: to time the usbgw CLI alone.  The CLI's
      opening hello gets a real answer.  Runs until killed.

A request that fails (timeout 30 s, error reply, closed) counts in
failed and its time in the latencies.  Exit status 0 unless the socket
cannot be used at all.
"""
import json
import socket
import struct
import sys
import time

REQ_TIMEOUT = 30.0


def frame(obj):
    b = json.dumps(obj).encode()
    return struct.pack(">I", len(b)) + b


class Conn:
    def __init__(self, path, timeout=REQ_TIMEOUT):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = bytearray()

    def _fill(self, n):
        while len(self.buf) < n:
            c = self.s.recv(1 << 20)
            if not c:
                raise EOFError("closed by the daemon")
            self.buf += c

    def recv_raw(self):
        """One frame's bytes, not parsed."""
        self._fill(4)
        n = struct.unpack(">I", self.buf[:4])[0]
        self._fill(4 + n)
        b = bytes(self.buf[4:4 + n])
        del self.buf[:4 + n]
        return b

    def recv(self):
        self._fill(4)
        n = struct.unpack(">I", self.buf[:4])[0]
        self._fill(4 + n)
        b = bytes(self.buf[4:4 + n])
        del self.buf[:4 + n]
        return json.loads(b)

    def send(self, obj):
        self.s.sendall(frame(obj))

    def close(self):
        self.s.close()


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def status_once(path):
    """One timed status on a fresh connection: (ms, result or None)."""
    t = time.monotonic()
    res = None
    try:
        c = Conn(path)
        c.send({"v": 1, "id": 1, "cmd": "status"})
        m = c.recv()
        c.close()
        if m.get("ok"):
            res = m["result"]
    except (OSError, EOFError, ValueError):
        pass
    return (time.monotonic() - t) * 1000.0, res


def request_once(path, cmd, args):
    """One timed request on a fresh connection: (ms, ok or None)."""
    t = time.monotonic()
    ok = None
    try:
        c = Conn(path)
        c.send({"v": 1, "id": 1, "cmd": cmd, "args": args})
        m = c.recv()
        c.close()
        ok = bool(m.get("ok"))
    except (OSError, EOFError, ValueError):
        pass
    return (time.monotonic() - t) * 1000.0, ok


def lat_fields(lat):
    return "p50_ms=%.1f p99_ms=%.1f max_ms=%.1f" % (
        pct(lat, 50), pct(lat, 99), max(lat) if lat else float("nan"))


def cmd_add(path, portsfile, host):
    lines = [l.split() for l in open(portsfile) if l.strip()]
    c = Conn(path, timeout=600)
    t0 = time.monotonic()
    sent = done = ok = 0
    errors = []
    window = 32
    while done < len(lines):
        while sent < len(lines) and sent - done < window:
            name, port = lines[sent][0], int(lines[sent][1])
            c.send({"v": 1, "id": sent + 1, "cmd": "exporter.add",
                    "args": {"name": name, "host": host, "port": port}})
            sent += 1
        m = c.recv()
        done += 1
        if m.get("ok"):
            ok += 1
        elif len(errors) < 5:
            errors.append(json.dumps(m.get("error")))
    c.close()
    for e in errors:
        print("exporter.add failed: " + e, file=sys.stderr)
    print("RESULT added=%d failed=%d seconds=%.2f" % (
        ok, len(lines) - ok, time.monotonic() - t0))


def cmd_watch(path, expect, timeout, t0, busid=None):
    lat, failed, max_gone = [], 0, 0
    dlat, derr = [], 0
    reached, pending, pending_s = 0, 0, float("nan")
    next_progress = time.time() + 5
    while True:
        start = time.time()
        ms, res = status_once(path)
        lat.append(ms)
        if busid:
            for cmd, args in (("approve", {"busid": busid}),
                              ("revoke", {"busid": busid})):
                dms, ok = request_once(path, cmd, args)
                dlat.append(dms)
                derr += ok is not True
        if res is None:
            failed += 1
        else:
            devs = res.get("devices", {})
            pending = devs.get("pending", 0)
            max_gone = max(max_gone, devs.get("gone", 0))
            if pending >= expect:
                reached, pending_s = 1, time.time() - t0
        now = time.time()
        if now >= next_progress or reached:
            print("  t=%5.1fs status %6.1f ms devices %s" % (
                now - t0, ms, json.dumps(res.get("devices") if res else
                                         "(no answer)")), file=sys.stderr)
            next_progress = now + 5
        if reached or now - t0 >= timeout:
            break
        time.sleep(max(0.0, 0.1 - (now - start)))
    extra = ""
    if busid:
        extra = " decide_%s decide_n=%d decide_errors=%d" % (
            lat_fields(dlat).replace(" ", " decide_"), len(dlat), derr)
    print("RESULT reached=%d pending_s=%.2f pending=%d expected=%d "
          "samples=%d %s failed=%d max_gone=%d%s" % (
              reached, pending_s, pending, expect, len(lat), lat_fields(lat),
              failed, max_gone, extra))


def cmd_rest(path, n):
    lat, failed = [], 0
    for _ in range(n):
        start = time.monotonic()
        ms, res = status_once(path)
        lat.append(ms)
        failed += res is None
        time.sleep(max(0.0, 0.1 - (time.monotonic() - start)))
    print("RESULT samples=%d %s failed=%d" % (n, lat_fields(lat), failed))


def cmd_list(path):
    t = time.monotonic()
    c = Conn(path, timeout=120)
    c.send({"v": 1, "id": 1, "cmd": "list"})
    m = c.recv()
    c.close()
    n = len(m.get("result", [])) if m.get("ok") else -1
    print("RESULT devices=%d ms=%.1f" % (n, (time.monotonic() - t) * 1000))


def cmd_list_raw(path, n, save):
    c = Conn(path, timeout=120)
    times, b = [], b""
    for i in range(n):
        t = time.monotonic()
        c.send({"v": 1, "id": i + 1, "cmd": "list"})
        b = c.recv_raw()
        times.append((time.monotonic() - t) * 1000)
    c.close()
    size = len(b)
    if save:
        with open(save, "wb") as f:
            f.write(b)
    print("RESULT bytes=%d median_ms=%.1f min_ms=%.1f" % (
        size, pct(times, 50), min(times)))


def cmd_serve(path, framefile):
    import os
    import re
    text = open(framefile, "rb").read()
    m = re.match(rb'\{"v":1,"id":(null|-?[0-9]+),', text)
    if m is None:
        print("serve: %s does not start with {\"v\":1,\"id\":" % framefile,
              file=sys.stderr)
        sys.exit(1)
    head, tail = b'{"v":1,"id":', text[m.end(1):]
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    ls.bind(path)
    ls.listen(8)
    while True:
        s, _ = ls.accept()
        c = Conn.__new__(Conn)
        c.s, c.buf = s, bytearray()
        try:
            while True:
                req = c.recv()
                if req.get("cmd") == "hello":
                    # the CLI's greeting (protocol.md 2.6): a real answer
                    s.sendall(frame({"v": 1, "id": req.get("id"),
                                     "ok": True, "result": {
                                         "version": 1,
                                         "daemon": "scale-ctl serve",
                                         "uid": os.getuid(), "name": "fake",
                                         "pid": os.getpid(),
                                         "privilege": "admin"}}))
                    continue
                out = head + str(req.get("id")).encode() + tail
                s.sendall(struct.pack(">I", len(out)) + out)
        except (OSError, EOFError, ValueError):
            s.close()


def main():
    a = sys.argv
    if len(a) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, cmd = a[1], a[2]
    if cmd == "add" and len(a) in (4, 5):
        cmd_add(path, a[3], a[4] if len(a) == 5 else "127.0.0.1")
    elif cmd == "watch" and len(a) in (5, 6, 7):
        cmd_watch(path, int(a[3]), float(a[4]),
                  float(a[5]) if len(a) >= 6 else time.time(),
                  a[6] if len(a) == 7 else None)
    elif cmd == "rest" and len(a) == 4:
        cmd_rest(path, int(a[3]))
    elif cmd == "list" and len(a) == 3:
        cmd_list(path)
    elif cmd == "list-raw" and len(a) in (4, 5):
        cmd_list_raw(path, int(a[3]), a[4] if len(a) == 5 else None)
    elif cmd == "serve" and len(a) == 4:
        cmd_serve(path, a[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
