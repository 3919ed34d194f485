#!/usr/bin/env python3
"""Write the seed corpus of fuzz_control and fuzz_config.

    tests/fuzz/gen-corpus-control.py [tests/fuzz/corpus]

fuzz_control input: one mode byte (bits 0-1 frame limit: 0 16 B, 1 64 KiB,
2 1 KiB, 3 16 MiB; bit 2: 1 = replies as the CLI sees them), then frames
(4-byte big-endian length + JSON).  fuzz_config input: a config file.
Files named regress-* are crash reproducers; this script leaves them alone.
"""
import json
import os
import struct
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus"


def frame(obj):
    b = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">I", len(b)) + b


def write(sub, name, data):
    d = os.path.join(root, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


REQ, REP = 1, 1 | 4
requests = {
    "hello": {"v": 1, "id": 1, "cmd": "hello"},
    "list": {"v": 1, "id": 2, "cmd": "list", "args": {"state": "pending"}},
    "approve-once": {"v": 1, "id": 3, "cmd": "approve",
                     "args": {"busid": "tc17-1-1.2", "scope": "once"}},
    "approve-for": {"v": 1, "id": 4, "cmd": "approve",
                    "args": {"busid": "tc17", "scope": "for", "duration": 3600,
                             "to": "vdi01", "message": "ticket 42"}},
    "approve-until": {"v": 1, "id": 5, "cmd": "approve",
                      "args": {"busid": "tc17", "scope": "until",
                               "until": 4102444800}},
    "deny": {"v": 1, "id": 6, "cmd": "deny",
             "args": {"busid": "x", "permanent": True, "message": "no"}},
    "policy-insert": {"v": 1, "id": 7, "cmd": "policy.insert",
                      "args": {"position": 2, "rule": "allow id 046d:c52b"}},
    "watch": {"v": 1, "id": 8, "cmd": "watch",
              "args": {"events": ["pending", "access-request"]}},
    "no-id": {"v": 1, "cmd": "status"},
    "v2": {"v": 2, "id": 9, "cmd": "list"},
    "bad-args": {"v": 1, "id": 10, "cmd": "list", "args": [1]},
}
for name, obj in requests.items():
    write("control", "req-" + name, bytes([REQ]) + frame(obj))
write("control", "req-pipelined", bytes([REQ]) + b"".join(
    frame(o) for o in requests.values()))
write("control", "req-badjson", bytes([REQ]) + frame(b'{"v":1,') +
      frame(requests["hello"]))
write("control", "req-nul", bytes([REQ]) + frame(b'{"v":1,"cmd":"a\\u0000"}'))
write("control", "req-dupkey", bytes([REQ]) + frame(b'{"v":1,"v":1,"cmd":"x"}'))
write("control", "req-toobig", bytes([2]) + struct.pack(">I", 4096) + b"{}")
write("control", "req-zero", bytes([REQ]) + struct.pack(">I", 0))
write("control", "req-deep", bytes([REQ]) + frame(b"[" * 3000 + b"]" * 3000))

device = {"busid": "tc17-1-1.2", "exporter": "tc17", "exporter_busid": "1-1.2",
          "state": "pending", "vid": "046d", "pid": "c52b", "serial": "ABC",
          "interfaces": ["03:01:01"], "approval": None}
replies = {
    "ok-list": {"v": 1, "id": 2, "ok": True, "result": [device]},
    "ok-empty": {"v": 1, "id": 3, "ok": True},
    "error": {"v": 1, "id": 4, "ok": False,
              "error": {"code": "ambiguous", "message": "2 devices match"}},
    "error-unknown": {"v": 1, "id": None, "ok": False,
                      "error": {"code": "new_code"}},
    "event": {"v": 1, "event": "pending", "time": 1733212345.123,
              "data": dict(device, actor={"kind": "system"})},
    "event-nodata": {"v": 1, "event": "policy"},
}
for name, obj in replies.items():
    write("control", "rep-" + name, bytes([REP]) + frame(obj))

configs = {
    "minimal": "exporter sim 127.0.0.1:3240\n",
    "full": """# full
database = /var/lib/usbgw/usbgw.db
pid-file = none
log-level = debug
log-target = stderr
control-socket = /run/usbgw/control.sock
control-group = usbgw
control-socket-mode = 0660
max-connections = 64
max-connections-per-uid = 16
control-max-message = 64k
control-max-output = 4m
control-timeout = 30s
allow-read = @usbgw alice 1001
allow-approve = @usbgw-ops
allow-admin = @0
listen = *:3240
listen = [::1]:3241
listen = 127.0.0.1
poll-interval = 3s
probe-timeout = 5000ms
attach-pending-wait = 1m
show-pending = no
max-sessions = 256
hook-timeout = 10s
hook-max-running = 4
mode = proxy
vhci-controller = any
exporter tc17 192.0.2.17:3240
exporter desk-2 [2001:db8::2]
hook pending,access-request /usr/local/bin/notify "$USBGW_BUSID"
hook all logger -t usbgw
""",
    "errors": "foo\n= x\nlisten = ::1\nexporter a\nhook x y\n"
              "poll-interval = 2d\ndatabase = \"x\n",
}
for name, text in configs.items():
    write("config", name, text.encode())
