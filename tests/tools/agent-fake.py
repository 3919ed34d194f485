#!/usr/bin/env python3
"""agent-fake.py: the agent side of usbgw's USB/IP extension (protocol.md
1.9.4) in front of a usbgw-sim, so that the gateway's whole claim, probe
and relay path runs against sim devices behind a "usbgw-agent".  Python 3,
stdlib only; written from protocol.md, independently of agentproto.c.

    agent-fake.py --name NAME --sim HOST:PORT --sim-ctl PATH
                  [--listen ADDR:PORT --port-file FILE]
                  [--gateway HOST:PORT ...] [--log FILE] [--poll-ms N]

Devices: the sim's control socket is read every --poll-ms (default 20):
a device plugged there is pushed as DEV_ADDED (its record and interfaces
from the sim's own OP_REP_DEVLIST), one unplugged as DEV_REMOVED.  Every
control connection starts with a snapshot.

Listen mode (--listen): a connection whose first op code is 0x8067 is a
gateway's CONTROL; any other is proxied to the sim byte for byte (a
stock import or device list).

TLS (--tls-dir DIR, protocol.md 1.10.8): every connection, whoever opened
it, is TLS with this side as TLS's client, showing DIR/ROLE.pem
(--tls-role, default agent) and trusting DIR/gateway-ca.pem.

Dial-out (--gateway, in order, failover, reconnect 1 s doubling to 60 s
+-20 %): one control connection; OPEN_IMPORT(busid, token) opens a new
connection to the control connection's address, sends DIALBACK and,
once the gateway says ST_OK, proxies it to the sim.  A busid the sim
does not have gets OPEN_FAILED(ST_NODEV).

--log FILE gets one line per event with a monotonic time in ms:
  T push DEV_ADDED 1-2 / T push DEV_REMOVED 1-2 / T control up HOST:PORT
  T control down HOST:PORT WHY / T dialback 1-2 ok|refused / T open-failed 1-2
"""
import argparse
import os
import random
import socket
import ssl
import struct
import sys
import threading
import time

V = 0x0111
OP_REQ_USBGW, OP_REP_USBGW = 0x8067, 0x0067
OP_REQ_DEVLIST, OP_REP_DEVLIST = 0x8005, 0x0005
CONTROL, DIALBACK = 1, 2
(SNAPSHOT_BEGIN, SNAPSHOT_END, DEV_ADDED, DEV_REMOVED, OPEN_IMPORT,
 OPEN_FAILED, PING, PONG, BYE) = range(1, 10)
ST_OK, ST_NA, ST_NODEV = 0, 1, 4

args = None
log_lock = threading.Lock()
logf = None


def log(msg):
    line = "%d %s\n" % (int(time.monotonic() * 1000), msg)
    with log_lock:
        if logf is not None:
            logf.write(line)
            logf.flush()
        sys.stderr.write("agent-fake: " + line)


def pad(s, n):
    b = s.encode() if isinstance(s, str) else s
    return b[:n - 1].ljust(n, b"\0")


def cstr(b):
    return b.split(b"\0", 1)[0].decode("ascii", "replace")


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise EOFError("closed")
        buf += c
    return buf


def tls_wrap(s):
    """The agent is always TLS's client (--tls-dir), else s as it is."""
    if not args.tls_dir:
        return s
    d, r = args.tls_dir, args.tls_role
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.load_verify_locations(os.path.join(d, "gateway-ca.pem"))
    ctx.load_cert_chain(os.path.join(d, r + ".pem"), os.path.join(d, r + ".key"))
    return ctx.wrap_socket(s, server_side=False)


def parse_addr(a):
    h, p = a.rsplit(":", 1)
    return h.strip("[]"), int(p)


# ---- the sim's devices ----------------------------------------------------

def sim_ctl(cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(args.sim_ctl)
    s.sendall((cmd + "\n").encode())
    out = b""
    while not (out.endswith(b"ok\n") or b"error:" in out):
        c = s.recv(65536)
        if not c:
            break
        out += c
    s.close()
    return out.decode(errors="replace").splitlines()


def sim_present():
    return {ln.split()[0] for ln in sim_ctl("list")[:-1] if ln.strip()}


def sim_devlist():
    """{busid: (record 312 bytes, interface bytes)} from OP_REP_DEVLIST."""
    s = socket.create_connection(parse_addr(args.sim), timeout=5)
    s.sendall(struct.pack(">HHI", V, OP_REQ_DEVLIST, 0))
    hdr = recv_exact(s, 12)
    ndev = struct.unpack(">I", hdr[8:12])[0]
    out = {}
    for _ in range(ndev):
        rec = recv_exact(s, 312)
        nintf = rec[0x137]
        intf = recv_exact(s, 4 * nintf)
        out[cstr(rec[256:288])] = (rec, intf)
    s.close()
    return out


class Devices:
    def __init__(self):
        self.lock = threading.Lock()
        self.records = {}       # busid -> (rec, intf), announced
        self.present = set()

    def poll(self):
        present = sim_present()
        new = present - set(self.records)
        gone = set(self.records) - present
        recs = sim_devlist() if new else {}
        added = []
        with self.lock:
            self.present = present
            for b in sorted(new):
                if b in recs:
                    self.records[b] = recs[b]
                    added.append(b)
            for b in sorted(gone):
                del self.records[b]
        for b in added:
            broadcast_added(b)
        for b in sorted(gone):
            broadcast_removed(b)


devices = Devices()

# ---- control connections ---------------------------------------------------

controls = []
controls_lock = threading.Lock()


class Control:
    def __init__(self, sock, label, gw_addr=None):
        self.sock = sock
        self.label = label
        self.gw_addr = gw_addr      # dial-out: where to dial back
        self.seq = 0
        self.lock = threading.Lock()
        self.dead = False

    def send(self, t, body=b""):
        with self.lock:
            if self.dead:
                return
            self.seq += 1
            try:
                self.sock.sendall(struct.pack(">IHHI", 8 + len(body), t, 0,
                                              self.seq) + body)
            except OSError:
                self.dead = True

    def snapshot(self):
        with devices.lock:
            recs = dict(devices.records)
        self.send(SNAPSHOT_BEGIN, struct.pack(">I", len(recs)))
        for b, (rec, intf) in sorted(recs.items()):
            self.send(DEV_ADDED, rec + intf)
        self.send(SNAPSHOT_END)


def broadcast_added(busid):
    with devices.lock:
        r = devices.records.get(busid)
    if r is None:
        return
    log("push DEV_ADDED %s" % busid)
    with controls_lock:
        cs = list(controls)
    for c in cs:
        c.send(DEV_ADDED, r[0] + r[1])


def broadcast_removed(busid):
    log("push DEV_REMOVED %s" % busid)
    with controls_lock:
        cs = list(controls)
    for c in cs:
        c.send(DEV_REMOVED, pad(busid, 32))


def control_loop(c):
    """Read the gateway's messages until the connection ends."""
    with controls_lock:
        controls.append(c)
    c.snapshot()
    log("control up %s" % c.label)
    why = "closed"
    try:
        while True:
            hdr = recv_exact(c.sock, 12)
            ln, t, flags, seq = struct.unpack(">IHHI", hdr)
            if ln < 8 or ln > 4096:
                why = "bad length"
                break
            body = recv_exact(c.sock, ln - 8)
            if t == PING:
                c.send(PONG, body)
            elif t == OPEN_IMPORT and c.gw_addr is not None:
                busid, token = cstr(body[:32]), body[32:48]
                threading.Thread(target=dial_back,
                                 args=(c, busid, token), daemon=True).start()
            elif t == BYE:
                why = "BYE"
                break
    except (EOFError, OSError) as e:
        why = str(e)
    with controls_lock:
        if c in controls:
            controls.remove(c)
    c.dead = True
    try:
        c.sock.close()
    except OSError:
        pass
    log("control down %s %s" % (c.label, why))


# ---- proxying to the sim ---------------------------------------------------

def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def proxy(conn, first):
    try:
        sim = socket.create_connection(parse_addr(args.sim), timeout=5)
        sim.settimeout(None)
        sim.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if first:
            sim.sendall(first)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pipe, args=(sim, conn), daemon=True).start()
    pipe(conn, sim)


def dial_back(c, busid, token):
    with devices.lock:
        known = busid in devices.present
    if not known:
        log("open-failed %s" % busid)
        c.send(OPEN_FAILED, token + struct.pack(">I", ST_NODEV))
        return
    try:
        s = socket.create_connection(
            c.gw_addr, timeout=5,
            source_address=(args.source, 0) if args.source else None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s = tls_wrap(s)
        body = token + pad(busid, 32)
        s.sendall(struct.pack(">HHIHHI", V, OP_REQ_USBGW, 0, 1, DIALBACK,
                              len(body)) + body)
        rep = recv_exact(s, 16)
        st = struct.unpack(">I", rep[4:8])[0]
    except (OSError, EOFError):
        log("dialback %s failed" % busid)
        return
    if st != ST_OK:
        log("dialback %s refused" % busid)
        s.close()
        return
    log("dialback %s ok" % busid)
    s.settimeout(None)
    proxy(s, b"")


# ---- listen mode ------------------------------------------------------------

def serve(conn, peer):
    conn.settimeout(10)
    try:
        conn = tls_wrap(conn)
        first = recv_exact(conn, 4)
    except (OSError, EOFError):
        conn.close()
        return
    if struct.unpack(">HH", first) != (V, OP_REQ_USBGW):
        conn.settimeout(None)
        proxy(conn, first)
        return
    try:
        rest = recv_exact(conn, 12)
        ext, kind, ln = struct.unpack(">HHI", rest[4:12])
        if ln > 1024:
            raise EOFError("hello too long")
        recv_exact(conn, ln)
        if ext != 1 or kind != CONTROL or args.refuse_control:
            conn.sendall(struct.pack(">HHIHHI", V, OP_REP_USBGW, ST_NA, 1,
                                     kind, 0))
            conn.close()
            return
        body = pad(args.name, 32) + struct.pack(">IH", 0, 15)
        conn.sendall(struct.pack(">HHIHHI", V, OP_REP_USBGW, ST_OK, 1,
                                 CONTROL, len(body)) + body)
    except (OSError, EOFError):
        conn.close()
        return
    conn.settimeout(None)
    control_loop(Control(conn, "%s:%d" % peer))


def listener(addr):
    h, p = parse_addr(addr)
    ls = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((h, p))
    ls.listen(64)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % ls.getsockname()[1])
        os.rename(tmp, args.port_file)
    while True:
        conn, peer = ls.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(conn, peer[:2]),
                         daemon=True).start()


# ---- dial-out ---------------------------------------------------------------

def dialout():
    delay = 1.0
    while True:
        for g in args.gateway:
            addr = parse_addr(g)
            try:
                s = socket.create_connection(
                    addr, timeout=5,
                    source_address=(args.source, 0) if args.source else None)
                s = tls_wrap(s)
                body = pad(args.name, 32) + struct.pack(">I", 0) + \
                    os.urandom(16)
                s.sendall(struct.pack(">HHIHHI", V, OP_REQ_USBGW, 0, 1,
                                      CONTROL, len(body)) + body)
                rep = recv_exact(s, 16)
                st, ext, kind, ln = struct.unpack(">IHHI", rep[4:16])
                recv_exact(s, ln)
                if st != ST_OK:
                    log("control refused %s" % g)
                    s.close()
                    continue
            except (OSError, EOFError, ssl.SSLError) as e:
                log("control down %s %s" % (g, e))
                continue
            s.settimeout(None)
            up = time.monotonic()
            control_loop(Control(s, g, gw_addr=addr))
            if time.monotonic() - up >= 60:
                delay = 1.0
        time.sleep(delay * random.uniform(0.8, 1.2))
        delay = min(delay * 2, 60.0)


def main():
    global args, logf
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="fake")
    ap.add_argument("--sim", required=True)
    ap.add_argument("--sim-ctl", required=True)
    ap.add_argument("--listen")
    ap.add_argument("--port-file")
    ap.add_argument("--gateway", action="append", default=[])
    ap.add_argument("--log")
    ap.add_argument("--poll-ms", type=int, default=20)
    ap.add_argument("--refuse-control", action="store_true",
                    help="listen mode: answer CONTROL with ST_NA")
    ap.add_argument("--source", help="dial-out: connect from this address")
    ap.add_argument("--tls-dir", help="TLS as the client, with DIR's files")
    ap.add_argument("--tls-role", default="agent", help="agent or host")
    args = ap.parse_args()
    if args.log:
        logf = open(args.log, "a")
    devices.poll()
    if args.listen:
        threading.Thread(target=listener, args=(args.listen,),
                         daemon=True).start()
    if args.gateway:
        threading.Thread(target=dialout, daemon=True).start()
    while True:
        time.sleep(args.poll_ms / 1000.0)
        try:
            devices.poll()
        except (OSError, EOFError) as e:
            log("sim poll failed: %s" % e)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
