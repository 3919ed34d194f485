#!/usr/bin/env bash
# Busids on the command line (issue 18 item 5): `audit -d` matches one
# device exactly (tc17:1-1 is not tc17:1-10) and resolves a short busid as
# `show` does; an ambiguous busid names its candidates on every command; an
# unknown one is exit 3; an empty one is a usage error (exit 2), on
# every command that takes a busid, not only audit -d; a gone
# device's rows are still found by its exact busid.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

EJ=$USBGW_BUILD/e2e-json
need_prog "$USBGWD" "$USBGW" "$SIM" "$EJ"

printf 'device 1-1 { type keyboard }\n' >"$T/lone.conf"
for i in 1 2 3 4 5 6 7 8 9 10 11; do
	printf 'device 1-%d { type sourcesink }\n' "$i"
done >"$T/many.conf"
sim_start many -c "$T/many.conf" || bail_out "simulator did not start"
sim_start lone -c "$T/lone.conf" || bail_out "simulator did not start"
SOCK=$T/control.sock
cat >"$T/gw.conf" <<EOF
exporter tc17 127.0.0.1:$(sim_port many)
exporter lone 127.0.0.1:$(sim_port lone)
poll-interval = 300ms
EOF
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start"
U=("$USBGW" -s "$SOCK")
wait_for -t 15 sh -c "'$USBGW' -s '$SOCK' list --state pending --json | \
    '$EJ' count | grep -qx 12" || bail_out "devices did not become pending"

run "${U[@]}" approve tc17:1-1 -m one
is "$RC" 0 "approve tc17:1-1 (exact, though tc17:1-10 and 1-11 share it)"
run "${U[@]}" approve tc17:1-10 -m ten
is "$RC" 0 "approve tc17:1-10"
run "${U[@]}" approve lone -m lone
is "$RC" 0 "approve lone (a unique prefix: lone:1-1)"

# ---- audit -d -------------------------------------------------------------
run "${U[@]}" audit -d tc17:1-1 --json
is "$RC" 0 "audit -d tc17:1-1"
printf '%s' "$OUT" >"$T/a1.json"
num_cmp "$("$EJ" count busid=tc17:1-1 <"$T/a1.json")" -ge 1 "... has tc17:1-1's rows"
is "$("$EJ" count <"$T/a1.json")" "$("$EJ" count busid=tc17:1-1 <"$T/a1.json")" \
    "... and only tc17:1-1's (no tc17:1-10)"
run "${U[@]}" audit -d lone --json
is "$RC" 0 "audit -d lone: a short busid resolved like show"
printf '%s' "$OUT" >"$T/a2.json"
num_cmp "$("$EJ" count busid=lone:1-1 <"$T/a2.json")" -ge 1 "... to lone:1-1's rows"
is "$("$EJ" count <"$T/a2.json")" "$("$EJ" count busid=lone:1-1 <"$T/a2.json")" \
    "... and only those"
run "${U[@]}" audit -d tc17:1
is "$RC" 3 "audit -d tc17:1 (ambiguous): exit 3"
like "$ERR" 'busid tc17:1 matches 11 devices: tc17:1-1, tc17:1-2, .* and 3 more' \
    "... the candidates named"
run "${U[@]}" audit -d nosuch:9-9
is "$RC" 3 "audit -d an unknown busid: exit 3"
like "$ERR" 'no device and no audit row has busid nosuch:9-9' "... said so"
run "${U[@]}" audit -d ''
is "$RC" 2 "audit -d '': a usage error (exit 2)"
like "$ERR" 'empty busid' "... said so"
run "${U[@]}" audit -d 'tc17:1-%'
is "$RC" 3 "audit -d with a LIKE wildcard matches nothing (exit 3)"

# ---- ambiguous busids on other commands ---------------------------------
for c in show approve deny revoke; do
	run "${U[@]}" $c tc17:1
	is "$RC" 3 "$c tc17:1 (ambiguous): exit 3"
	like "$ERR" 'matches 11 devices: tc17:1-1, tc17:1-2, ' "... candidates named"
done
# ... and an empty busid is a usage error everywhere, as for audit -d
for c in show approve deny revoke; do
	run "${U[@]}" $c ''
	is "$RC" 2 "$c '': a usage error (exit 2)"
	like "$ERR" 'empty busid: expected EXPORTER:BUSID' "... said so"
done

# ---- times a person reads say their zone, never a raw epoch --------------
run "${U[@]}" approve tc17:1-2 --for 1h -m timed
is "$RC" 0 "approve tc17:1-2 --for 1h"
TZ=UTC run "${U[@]}" show tc17:1-2
like "$OUT" 'approved by [^ ]+ until 20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z' \
    "show: the approval's reason gives its end in UTC, said so"
unlike "$OUT" '[0-9]{10}' "... and no raw epoch anywhere in show"
TZ=UTC run "${U[@]}" audit -d tc17:1-2 --json
like "$OUT" '"detail": "scope for, expires 20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]+Z' \
    "audit: the approval row's expiry in UTC, said so"
unlike "$OUT" '(expires|until) [0-9]{9}' "... not a raw epoch"
TZ=UTC run "${U[@]}" audit -d tc17:1-2
like "$OUT" '
20[0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9:]+ UTC ' \
    "audit: each row's time names its zone (TZ=UTC)"
TZ=Europe/Berlin run "${U[@]}" audit -d tc17:1-2
like "$OUT" '
20[0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9:]+ CES?T ' \
    "audit: local time in another TZ names that zone"

# ---- a gone device ------------------------------------------------------
run "${U[@]}" exporter remove lone
is "$RC" 0 "exporter remove lone"
wait_for -t 10 sh -c "! '$USBGW' -s '$SOCK' show lone:1-1 >/dev/null 2>&1"
run "${U[@]}" audit -d lone:1-1 --json
is "$RC" 0 "audit -d lone:1-1 after its exporter is gone (exact busid)"
printf '%s' "$OUT" >"$T/a3.json"
num_cmp "$("$EJ" count busid=lone:1-1 <"$T/a3.json")" -ge 1 "... still has its rows"
done_testing
