#!/bin/bash
# usbgw exporter import (issue 18 item 4): a good file is taken whole (one
# audit row with the count), a file with bad lines of every kind is
# refused whole with each line named and nothing changed, stdin works,
# and --replace makes the file the set of exporters added with usbgw:
# the others go (their devices with them), the config file's stay and
# the command says so.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 42

cat >"$T/sim.conf" <<'EOF'
device 1-2 { type storage; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
sim_start sim2 -c "$T/sim.conf" || bail_out "second simulator did not start"
SP=$(sim_port sim)
S2P=$(sim_port sim2)
P1=$(free_port)
P2=$(free_port)

gw_conf gw "exporter cfg1 127.0.0.1:$S2P" "poll-interval = 300ms"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw cfg1:1-2 pending

# nexp: how many exporters exporter list --json shows
nexp() {
	timeout 20 "$USBGW" -s "$(gw_sock gw)" exporter list --json |
	    "$EJSON" count
}
dbexp() {
	gw_sql gw "SELECT group_concat(name || '=' || host || ':' || port || \
	    '/' || source, ' ') FROM (SELECT * FROM exporters WHERE \
	    removed_at IS NULL ORDER BY name)"
}

# ---- a good file ---------------------------------------------------------------
cat >"$T/good.txt" <<EOF
# thin clients, floor 1

tc1 127.0.0.1:$SP
	tc2   127.0.0.1:$P1
exporter tc3 [0:0::1]:$P2 tls=required
EOF
gwctl gw exporter import "$T/good.txt"
is "$RC" 0 "import a good file: exit 0"
is "$OUT" "imported 3 exporters (0 removed)" "... says how many"
is "$(nexp)" 4 "three exporters more in exporter list"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get host name=tc3)" "::1" \
    "the IPv6 address as written canonically"
is "$(printf '%s' "$OUT" | "$EJSON" get tls name=tc3)" required \
    "the trailing option taken (tls=required)"
is "$(printf '%s' "$OUT" | "$EJSON" get source name=tc1)" cli \
    "an imported exporter is the database's (source cli)"
is "$(printf '%s' "$OUT" | "$EJSON" get source name=cfg1)" file \
    "the config file's is the file's (source file)"
gw_wait_state gw tc1:1-2 pending
check $? "tc1 is polled: its device claimed and pending"
is "$(gw_audit_count gw exporter-import)" 1 "one exporter-import audit row"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'exporter-import'")" \
    "good.txt: 3 exporters \(3 added, 0 changed, 0 unchanged\), 0 removed" \
    "... with the count"
is "$(gw_audit_count gw exporter-add "object LIKE 'tc%'")" 0 \
    "no audit row per exporter"
BEFORE=$(dbexp)
like "$BEFORE" "tc1=127.0.0.1:$SP/cli tc2=127.0.0.1:$P1/cli tc3=::1:$P2/cli" \
    "the database has them"

# ---- a file with bad lines of every kind: nothing changes -------------------------
cat >"$T/bad.txt" <<EOF
ok1 127.0.0.1:$(free_port)
bad/name 127.0.0.1:1
port0 127.0.0.1:0
porthigh 127.0.0.1:65536
words 127.0.0.1:2 and more
ok1 127.0.0.1:3
dupaddr 127.0.0.1:$P1
tc1 127.0.0.1:4
cfgaddr 127.0.0.1:$S2P
v6 [::1:5
opt 127.0.0.1:6 tls=optional
EOF
gwctl gw exporter import "$T/bad.txt"
is "$RC" 2 "a file with bad lines: exit 2"
like "$ERR" "usbgw: .*bad.txt: 10 lines refused; nothing imported" \
    "... nothing imported, how many lines"
like "$ERR" "bad.txt:2: exporter: expected a name of 1 to 31 letters" \
    "line 2: the name rules"
like "$ERR" "bad.txt:3: exporter port0: expected a port number from 1 to 65535" \
    "line 3: port 0"
like "$ERR" "bad.txt:4: exporter porthigh: expected a port number from 1 to 65535" \
    "line 4: port over 65535"
like "$ERR" "bad.txt:5: expected \"NAME HOST\[:PORT\] \[agent\] \[tls=required\|off\]\"" \
    "line 5: the form"
like "$ERR" "bad.txt:6: exporter ok1: already declared at line 1" \
    "line 6: a name twice in the file"
like "$ERR" "bad.txt:7: exporter dupaddr: address 127.0.0.1:$P1 is exporter tc2's \(added with usbgw exporter add or import\)" \
    "line 7: an existing exporter's address, naming it"
like "$ERR" "bad.txt:8: exporter tc1 exists" "line 8: an existing name"
like "$ERR" "bad.txt:9: exporter cfgaddr: address 127.0.0.1:$S2P is exporter cfg1's \(declared at gw.conf:1\)" \
    "line 9: the config file's exporter's address, naming it and where"
like "$ERR" "bad.txt:10: exporter v6: expected ']' after an IPv6 address" \
    "line 10: the address"
like "$ERR" "bad.txt:11: exporter opt: expected tls=required or tls=off" \
    "line 11: an option"
is "$(nexp)" 4 "nothing added"
is "$(dbexp)" "$BEFORE" "the database unchanged"
is "$(gw_audit_count gw exporter-import)" 1 "no audit row for a refused import"

# a duplicate address within the file, spelled two ways
printf 'a1 [::1]:7\na2 [0::1]:7\n' >"$T/dup6.txt"
gwctl gw exporter import "$T/dup6.txt"
like "$ERR" "dup6.txt:2: exporter a2: address \[::1\]:7 is exporter a1's \(line 1\)" \
    "an IPv6 address twice in the file, spelled differently: refused"

# ---- stdin --------------------------------------------------------------------
run sh -c "printf 'tc5 127.0.0.1:$(free_port)\n' | '$USBGW' -s '$(gw_sock gw)' exporter import -"
is "$RC" 0 "import from stdin (-)"
is "$OUT" "imported 1 exporters (0 removed)" "... one"

# ---- --replace ----------------------------------------------------------------
claims0=$(sim_dev_field sim 1-2 imports)
cat >"$T/set.txt" <<EOF
tc1 127.0.0.1:$SP
tc6 127.0.0.1:$(free_port)
EOF
gwctl gw exporter import --replace "$T/set.txt"
is "$RC" 0 "import --replace"
like "$OUT" "^imported 2 exporters \(3 removed\)" "... tc2, tc3 and tc5 removed"
like "$OUT" "left 1 exporters of the configuration files as they are" \
    "... and it says the config file's exporter stays"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" count)" 3 "cfg1, tc1 and tc6 left"
is "$(printf '%s' "$OUT" | "$EJSON" count name=tc2)" 0 "tc2 gone"
is "$(gw_state gw tc1:1-2)" pending "tc1 unchanged: its device still pending"
is "$(sim_dev_field sim 1-2 imports)" "$claims0" \
    "... its claim kept (not claimed again)"
is "$(gw_sql gw "SELECT count(*) FROM exporters WHERE removed_at IS NOT NULL")" 3 \
    "the removed ones marked removed in the database"

# a --replace naming the config file's exporter is refused
printf 'cfg1 127.0.0.1:%s\n' "$S2P" >"$T/cfg.txt"
gwctl gw exporter import --replace "$T/cfg.txt"
like "$ERR" "cfg.txt:1: exporter cfg1 is declared at gw.conf:1: the configuration's, not the database's" \
    "--replace cannot take over the config file's exporter"

gw_finish gw
done_testing
