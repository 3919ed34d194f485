#!/usr/bin/env bash
# usbgw-agent's guardian (protocol.md 1.9.2): a process forked before
# libusb, which outlives the agent and, when the agent dies without giving
# its devices back (SIGKILL), re-attaches the kernel drivers of what the
# state file lists.  This machine has no USB: the checks here are the
# process mechanics (it exists, ignores SIGTERM, holds no listening
# socket, wakes at the agent's death and reads the state file, exits;
# after a clean stop it has nothing to do).  The real re-attach is the
# qemu scenario 67-agent-kill.
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" pgrep ss

plan 14

guardian_of() { pgrep -P "$1" -x usbgw-guardian; }

port=$(free_port)
printf 'state-file %s\n' "$T/held" >"$T/a.conf"
start_bg agent "$AGENT" -f -v -c "$T/a.conf" -l "127.0.0.1:$port" -a 127.0.0.1
wait_port "$port" 10 agent || bail_out "the agent did not start"
apid=$(bg_pid agent)
g=$(guardian_of "$apid")
isnt "$g" "" "the agent has a guardian child (usbgw-guardian)"
kill -TERM "$g" 2>/dev/null
sleep 0.3
ok "the guardian ignores SIGTERM" kill -0 "$g"
num_cmp "$(ss -Htlnp 2>/dev/null | grep -c "pid=$apid,")" -ge 1 \
    "ss names the agent as the listener (root sees other processes' sockets)"
is "$(ss -Htlnp 2>/dev/null | grep -c "pid=$g,")" 0 \
    "the guardian holds no listening socket"
# What a crashed agent leaves: one held device.  The guardian checks that
# the device at that busid is still the one listed (busnum/devnum in
# sysfs) before it touches anything; here there is no such device.
printf '# busid busnum devnum config interfaces\n1-1 1 2 1 0,1\n' >"$T/held"
kill -KILL "$apid"
wait_bg agent 5
is "$RC" 137 "the agent is SIGKILLed"
wait_for -t 5 eval '! kill -0 '"$g"' 2>/dev/null'
check $? "the guardian exits after the agent's death"
like "$(cat "$(bg_log agent)")" 'reattach: 1-1: not the device listed' \
    "... having read the state file and checked the device at 1-1"

# A clean stop removes the state file: the guardian has nothing to do.
rm -f "$T/held"
start_bg agent2 "$AGENT" -f -v -c "$T/a.conf" -l "127.0.0.1:$port" -a 127.0.0.1
wait_port "$port" 10 agent2 || bail_out "the agent did not start again"
g=$(guardian_of "$(bg_pid agent2)")
isnt "$g" "" "a new guardian for the new agent"
stop_bg agent2
is "$RC" 0 "SIGTERM: the agent exits 0"
wait_for -t 5 eval '! kill -0 '"$g"' 2>/dev/null'
check $? "its guardian exits too"
unlike "$(cat "$(bg_log agent2)")" 'reattach:|guardian:' \
    "... without re-attaching anything"
# The state file's optional sixth field: a device the agent's config says
# not to reset is marked so (the guardian resets every other one before the
# drivers come back: 67-agent-kill); anything else there is refused.
printf '1-1 1 2 1 0 no-reset\n' >"$T/held2"
out=$("$AGENT" --reattach "$T/held2" 2>&1)
like "$out" 'reattach: 1-1: not the device listed' \
    "--reattach reads a no-reset line (and checks the device)"
printf '1-1 1 2 1 0 reset-twice\n' >"$T/held3"
out=$("$AGENT" --reattach "$T/held3" 2>&1)
is "$?" 1 "--reattach: an unknown sixth field is an error (exit 1)"
like "$out" 'held3:1: expected "busid busnum devnum config interfaces \[no-reset\]"' \
    "... naming the file, the line and the expected form"
done_testing
