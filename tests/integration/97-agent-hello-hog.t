#!/bin/bash
# Red team (issue 14): the dial-in hello slots (protocol.md 1.9.4, "at
# most 256 such connections are in their hello at once, each for at most
# 10 s") must not be a lock anybody who reaches the USB/IP port can hold.
# 300 connections from 127.0.0.2 start an extension hello and stall;
# the declared agent tc66 (from 127.0.0.1) must still be admitted at
# once, and one address may hold only AGENTGW_MAX_DIALIN_PER_HOST of the
# slots: its oldest stalled connections are closed to make room.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$USBGWD" "$USBGW" sqlite3 python3
plan 9

EVIL=$TOP/tests/tools/agent-evil.py
gw_conf gw "agent tc66 from 127.0.0.1/32" "poll-interval = 1s"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
res() { printf '%s\n' "$OUT" | sed -n "s/^RESULT $1=//p"; }

run -t 60 python3 "$EVIL" hog "$GWA" --source 127.0.0.2
is "$(res admitted)" 1 "tc66 is admitted while 300 stalled hellos come from 127.0.0.2"
num_cmp "$(res hogs_open)" -le 32 \
    "127.0.0.2 holds at most 32 hello slots ($(res hogs_open) of 300 open)"
like "$(cat "$T/gw.log")" 'agent connection from 127.0.0.2:[0-9]+ closed: 32 hellos from this address at once, the oldest goes' \
    "the log says why"

# the same from the agent's own address: its hello still gets through
run -t 60 python3 "$EVIL" hog "$GWA" --source 127.0.0.1
is "$(res admitted)" 1 "tc66 is admitted while 300 stalled hellos come from its own address"
num_cmp "$(res hogs_open)" -le 32 \
    "127.0.0.1 holds at most 32 hello slots ($(res hogs_open) of 300 open)"

gwctl gw status
is "$RC" 0 "the gateway lives on"

gw_finish gw
