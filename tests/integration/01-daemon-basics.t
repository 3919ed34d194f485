#!/usr/bin/env bash
# usbgwd basics: install layout, configuration errors named by file and
# line (all at once, exit 2), flags over the file, daemon mode with a pid
# file, SIGHUP reload (a bad file keeps the old configuration), SIGTERM.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
need_prog "$USBGWD" "$USBGW" "$SIM" make
plan 18

# --- make install --------------------------------------------------------
# (the build's own flags.  install depends on all; -o all: it must not
# relink the binaries every other test, running meanwhile, executes.
# The tests run on a finished build.)
if [ "${USBGW_ASAN:-0}" = 1 ]; then mkflags=(SANITIZE=1); else mkflags=(); fi
if ! make -s -q -C "$TOP" all B="$(basename "$USBGW_BUILD")" "${mkflags[@]}" \
    >/dev/null 2>&1; then
	diag "the build in $USBGW_BUILD is not up to date: installing it as it is"
fi
run make -s -C "$TOP" -o all install DESTDIR="$T/stage" PREFIX=/opt/usbgw \
    B="$(basename "$USBGW_BUILD")" "${mkflags[@]}"
is "$RC" 0 "make install DESTDIR=... PREFIX=/opt/usbgw"
ok "usbgwd installed in PREFIX/sbin" test -x "$T/stage/opt/usbgw/sbin/usbgwd"
ok "usbgw installed in PREFIX/bin" test -x "$T/stage/opt/usbgw/bin/usbgw"
ok "man pages installed" test -f "$T/stage/opt/usbgw/share/man/man8/usbgwd.8"

# --- configuration errors ------------------------------------------------
cat >"$T/bad.conf" <<'CONF'
poll-interval = soon
exporter bad:name 127.0.0.1:3240
no-such-key = 1
CONF
run "$USBGWD" -n -c "$T/bad.conf"
is "$RC" 2 "a bad configuration file: exit 2"
like "$ERR" "bad.conf:1: poll-interval: expected" "line 1 named with what was expected"
like "$ERR" "bad.conf:2: exporter: expected a name" "line 2 named"
like "$ERR" "bad.conf:3: unknown key \"no-such-key\"" "line 3 named: all errors at once"
run "$USBGWD" -n -c "$T/missing.conf"
isnt "$RC" 0 "a missing -c file is an error"
run "$USBGWD" --no-such-flag
is "$RC" 2 "an unknown flag: usage, exit 2"

# --- daemon mode, pid file, SIGHUP, SIGTERM --------------------------------
sim_start sim || bail_out "simulator did not start"
printf 'poll-interval = 500ms\nlog-target = stderr\n' >"$T/gw.conf"
run "$USBGWD" -c "$T/gw.conf" -d "$T/gw.db" -s "$T/gw.sock" \
    -l 127.0.0.1:0 -p "$T/gw.pid"
is "$RC" 0 "usbgwd without -f detaches and returns 0"
wait_file "$T/gw.pid" 10
pid=$(cat "$T/gw.pid" 2>/dev/null)
ok "the pid file names a running usbgwd" kill -0 "${pid:-0}"
wait_for -t 10 test -S "$T/gw.sock"

# SIGHUP: a new exporter in the file appears; a broken file changes nothing
printf 'poll-interval = 500ms\nexporter sim1 127.0.0.1:%s\n' "$(sim_port sim)" >"$T/gw.conf"
kill -HUP "$pid"
wait_for -t 10 sh -c "'$USBGW' -s '$T/gw.sock' list --json | grep -q sim1:1-2"
gwctl gw exporter list
like "$OUT" "sim1" "SIGHUP: the exporter added to the file is polled"
printf 'poll-interval = never\n' >"$T/gw.conf"
kill -HUP "$pid"
sleep 0.5
ok "SIGHUP with a broken file: the daemon keeps running" kill -0 "$pid"
gwctl gw list --json
like "$OUT" "sim1:1-2" "...with its old configuration"

kill -TERM "$pid"
wait_for -t 10 sh -c "! kill -0 $pid 2>/dev/null"
nok "SIGTERM: the daemon exits" kill -0 "$pid"
ok "SIGTERM: the pid file is removed" test ! -e "$T/gw.pid"
ok "SIGTERM: the control socket is removed" test ! -e "$T/gw.sock"
done_testing
