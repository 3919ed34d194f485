#!/bin/bash
# usbgw-agent in listen mode (protocol.md 1.9.4): a gateway that declared
# it with `usbgw exporter add NAME HOST:PORT --agent` connects to the
# agent's USB/IP listener and sends OP_REQ_USBGW CONTROL; the agent's
# engine hands the connection to ctlconn.c, which answers and sends its
# snapshot (empty here: no USB on this machine), then PING/PONG.  The
# gateway shows the control connection up.  A gateway outside the
# agent's allow-from gets nothing (closed at accept, audit: refused) and
# no control connection.  A gateway killed and restarted gets its control
# connection back.  A stock exporter (usbgw-sim) declared with --agent
# closes the unknown op and is polled (its device is found).  At exit the
# agent says BYE.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" sqlite3
plan 28

# start_agent NAME PORT ARGS...: start it and wait for its listener.
start_agent() {
	local name=$1 port=$2
	shift 2
	start_bg "$name" "$AGENT" -f -l "127.0.0.1:$port" "$@"
	wait_port "$port" 10 "$name" || {
		diag "usbgw-agent $name did not start:"
		_diag_text "$(cat "$(bg_log "$name")")"
		return 1
	}
}

# _ctl GW NAME: the exporter's control field ("true" when up).
_ctl() {
	"$USBGW" -s "$T/$1.sock" exporter list --json 2>/dev/null |
	    "$EJSON" get control "name=$2" 2>/dev/null
}
_ctl_up() { [ "$(_ctl "$1" "$2")" = true ]; }

printf '%s\n' "name ta91" "state-file none" >"$T/a.conf"
APORT=$(free_port)
start_agent agent "$APORT" -c "$T/a.conf" -a 127.0.0.1 ||
    bail_out "usbgw-agent did not start"

# poll-interval 30 s: the control connection, not a poll, makes it up
GW_LISTEN_PORT=$(free_port)
gw_conf gw "poll-interval = 30s"
gw_start gw || bail_out "usbgwd did not start"
t0=$(day_ms)
gwctl gw exporter add ta91 "127.0.0.1:$APORT" --agent
is "$RC" 0 "usbgw exporter add ta91 127.0.0.1:PORT --agent"
wait_for -t 15 _ctl_up gw ta91
check $? "the gateway's control connection to the agent is up"
up=$(gw_log_after_ms gw 'agent ta91 .*control connection up' "$t0")
num_cmp "$up" -lt 10000 "control up ${up} ms after the declaration"
note "metric listen-control-up-ms $up"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get kind name=ta91)" agent "exporter kind agent"
run "$TC" list "127.0.0.1:$APORT"
is "$RC:$(field ndev "$OUT")" 0:0 \
    "with the control connection up, the listener still serves DEVLIST"
like "$(cat "$T/agent.log")" 'audit: control peer=127\.0\.0\.1 state=up name=usbgwd via=listen' \
    "the agent logs the gateway's CONTROL (audit line)"
like "$(cat "$T/gw.log")" 'agent ta91 .*calls itself ta91\): control connection up' \
    "the gateway logs the agent's reply with its name"
unlike "$(cat "$T/gw.log")" 'malformed' "the agent's reply and snapshot are well-formed"
unlike "$(cat "$T/agent.log")" 'malformed' "the gateway's CONTROL is not taken for a malformed op"

# ---- a gateway outside allow-from gets nothing ------------------------------
printf '%s\n' "name tb91" "state-file none" >"$T/b.conf"
BPORT=$(free_port)
start_agent agentb "$BPORT" -c "$T/b.conf" -a 192.0.2.1 ||
    bail_out "second usbgw-agent did not start"
gwctl gw exporter add tb91 "127.0.0.1:$BPORT" --agent
is "$RC" 0 "exporter tb91 (an agent that does not allow the gateway) added"
wait_for -t 10 grep -q 'refused peer=127.0.0.1 .*not in allow-from' "$T/agentb.log"
check $? "the agent refuses the gateway at accept (audit: refused)"
wait_for -t 10 grep -q 'agent tb91 .*control closed' "$T/gw.log"
check $? "the gateway sees its control connection closed"
isnt "$(_ctl gw tb91)" true "no control connection to tb91"
unlike "$(cat "$T/agentb.log")" 'state=up' "the refused gateway got no control connection"
gwctl gw exporter remove tb91
stop_bg agentb TERM

# ---- the gateway killed, restarted: the control connection comes back -----
stop_bg gw KILL
wait_for -t 10 grep -q 'control peer=127.0.0.1 state=down' "$T/agent.log"
check $? "the agent sees the killed gateway's control connection go (audit line)"
t0=$(day_ms)
gw_start gw || bail_out "usbgwd did not restart"
wait_for -t 15 _ctl_up gw ta91
check $? "restarted, the gateway has its control connection back"
is "$(grep -c 'control peer=127.0.0.1 state=up name=usbgwd via=listen' "$T/agent.log")" 2 \
    "the agent answered two CONTROLs (one per gateway run)"
is "$(ss -Htn state established "( sport = :$APORT )" | wc -l)" 1 \
    "one control connection at the agent (the dead gateway's is gone)"
re=$(gw_log_after_ms gw 'agent ta91 .*control connection up' "$t0")
note "metric listen-control-restart-ms $re"

# ---- a stock exporter declared with --agent is polled ------------------------
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type storage; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gwctl gw exporter add stock91 "127.0.0.1:$(sim_port sim)" --agent
is "$RC" 0 "a stock usbgw-sim declared as an agent"
wait_for -t 10 grep -q 'agent stock91 .*control closed' "$T/gw.log"
check $? "its engine closes the extension op (no hook in usbgw-sim)"
wait_for -t 10 grep -Eq 'malformed|unknown op|extension' "$T/sim.log"
check $? "the sim logs the op it does not serve"
gw_wait_state gw stock91:1-1 pending 40
check $? "the stock exporter's device is found by polling"
isnt "$(_ctl gw stock91)" true "no control connection to the stock exporter"

# ---- BYE at exit ---------------------------------------------------------------
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
wait_for -t 10 grep -q 'agent ta91 .*control closed: the agent said BYE' "$T/gw.log"
check $? "it said BYE to the gateway"
gw_finish gw
