#!/usr/bin/env bash
# Issue 17 in local mode, with the fake vhci_hcd (vhci-kernel): the same
# per-interface verdicts as in proxy mode drive the kernel's interface
# `authorized`.
#  1. vhci-per-interface = yes: an allow rule's interface-policy keeps the
#     storage interface of the composite device from its driver; a policy
#     change while attached authorizes the interfaces again (the keyboard
#     denied, the storage allowed).
#  2. without vhci-per-interface the kernel would give every interface its
#     driver: a device under an interface-policy is not attached (auto and
#     `usbgw attach` say why); one without a policy is.
#  3. the counters of a direct attachment: the device relayed first (a
#     vhci host imports it over the gateway's listener; one URB to the
#     denied storage interface refused, one request to the device
#     forwarded), then attached directly: the direct attachment's row
#     ends with 0 refused and 0 URBs (no relay counts it), not the
#     relayed attachment's counters.  The attach is asked for as soon as
#     the relayed attachment's row has ended, while the gateway takes the
#     claim again: it waits for the claim instead of failing.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

VK=$USBGW_BUILD/vhci-kernel
need_prog "$SIM" "$USBGWD" "$USBGW" "$VK" "$TC" socat sqlite3
plan 27

cat >"$T/sim.conf" <<'EOF2'
device 1-3 { type composite; keys ""; serial "S13"; }
device 1-4 { type keyboard; keys ""; serial "S14"; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

K=$T/k
PLAT=$K/sys/devices/platform
HCD=$PLAT/vhci_hcd.0
start_bg vk "$VK" -c 1 -n 2 -p "$T/gw.pid" "$K"
wait_file "$K/ready" 10 vk || bail_out "vhci-kernel did not start: $(cat "$(bg_log vk)")"
GRAB=$(cat "$K/ready")
vk_wait() { wait_log vk "$1" "${2:-10}"; }
need_grab() {
	[ "$GRAB" = grab ] && return 0
	skip "$1" "pidfd_getfd(2) not permitted: the fake kernel cannot take the socket"
	return 1
}
authz() { cat "$HCD/usb3/3-1/3-1:1.$1/authorized" 2>/dev/null; }

# ---- 1. per-interface -----------------------------------------------------------
gw_conf gw "mode = local" "vhci-root = $PLAT" "local-attach = direct" \
    "vhci-lockdown = yes" "vhci-per-interface = yes" \
    "poll-interval = 500ms" "pid-file = $T/gw.pid" "exporter sim1 $SIMA"
gw_start gw || bail_out "usbgwd did not start in local mode: $(tail -n 5 "$T/gw.log")"
gwctl gw policy add 'allow id 1209:0003 interface-policy allow { block 08:*:* }'
is "$RC" 0 "allow the composite, its storage interface denied"
gw_wait_state gw sim1:1-3 attached
pass "attached (auto-attach)"
if need_grab 6; then
	vk_wait '^enumerated port=0'
	wait_for -t 10 test "$(authz 0)" = 1
	is "$(authz 0)" 1 "keyboard interface 3-1:1.0 authorized"
	is "$(authz 1)" 0 "storage interface 3-1:1.1 kept without a driver"
	gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'local-authorize' AND detail LIKE '%3-1:1.1 08:06:50 (interface-policy, rule 1)%'" 1
	is "$(gw_audit_count gw local-authorize)" 1 "audit: local-authorize names the interface and the rule"
	# the policy changes while attached: authorized again, the other way
	gwctl gw policy add 'allow id 1209:0003 interface-policy allow { block 03:*:* }'
	gwctl gw policy remove 1
	wait_for -t 10 test "$(authz 0)" = 0
	is "$(authz 0)" 0 "policy change: the keyboard interface now deauthorized"
	is "$(authz 1)" 1 "... and the storage interface authorized"
	is "$(gw_audit_count gw local-authorize)" 2 "audit: a second local-authorize"
fi
is "$(gw_state gw sim1:1-3)" attached "still attached through the policy change"
gwctl gw detach sim1:1-3
vk_wait '^detach port=0'
stop_bg gw TERM

# ---- 2. without vhci-per-interface ----------------------------------------------
rm -f "$T/gw.db" "$T/gw.sock"
gw_conf gw "mode = local" "vhci-root = $PLAT" "local-attach = direct" \
    "vhci-lockdown = yes" \
    "poll-interval = 500ms" "pid-file = $T/gw.pid" "exporter sim1 $SIMA"
gw_start gw || bail_out "usbgwd did not restart: $(tail -n 5 "$T/gw.log")"
gwctl gw policy add 'allow id 1209:0003 interface-policy allow { block 08:*:* }'
gwctl gw policy add 'allow id 1209:0001'
gw_wait_state gw sim1:1-4 attached
pass "the keyboard (no interface-policy) is attached"
gw_wait_state gw sim1:1-3 authorized
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'local-attach-failed' AND detail LIKE '%interface-policy%vhci-per-interface = yes%'" 1
is "$(gw_audit_count gw local-attach-failed "detail LIKE '%interface-policy%vhci-per-interface = yes%'")" 1 \
    "the composite under an interface-policy is not attached: audit says why"
is "$(gw_state gw sim1:1-3)" authorized "... it stays authorized, not attached"
gwctl gw attach sim1:1-3
is "$RC" 1 "usbgw attach refuses it"
like "$ERR" 'interface-policy: local mode keeps denied interfaces from their drivers only with vhci-per-interface = yes' "... saying why"
gw_finish gw

# ---- 3. the counters of a direct attachment -------------------------------------
rm -f "$T/gw.db" "$T/gw.sock"
gw_conf gw "mode = local" "vhci-root = $PLAT" "local-attach = direct" \
    "vhci-lockdown = yes" "vhci-per-interface = yes" "local-auto-attach = no" \
    "attach-pending-wait = 0" \
    "poll-interval = 500ms" "pid-file = $T/gw.pid" "exporter sim1 $SIMA"
gw_start gw || bail_out "usbgwd did not restart: $(tail -n 5 "$T/gw.log")"
gwctl gw policy add 'allow id 1209:0003 interface-policy allow { block 08:*:* }'
gw_wait_state gw sim1:1-3 authorized 15
ENDED="SELECT count(*) FROM attachments WHERE ended_at IS NOT NULL"
# CMD_SUBMIT seq 0x6101 bulk IN 0x82 (storage: refused), then seq 0x6102
# GET_STATUS to the device (forwarded); tc raw puts the devid in DEVID.
urbs=$(printf '00000001%08xDEVID%08x%08x00000000%08x000000000000000000000000%s' \
    $((0x6101)) 1 2 512 0000000000000000 $((0x6102)) 1 0 2 8000000000000200)
# The exporter holds still (SIGSTOP) from before the relay ends, so the
# gateway's new claim cannot finish: stopped once it has the forwarded
# GET_STATUS (and 300 ms to answer it), while the client still waits.
start_bg tcraw "$TC" raw "$(gw_addr gw)" sim1:1-3 --hex "$urbs" --wait 1500
sim_wait_pdu sim 'cmd=CMD_SUBMIT .*setup=8000000000000200' 10
sleep 0.3
kill -STOP "$(bg_pid sim)"
wait_bg tcraw 15
OUT=$(cat "$(bg_log tcraw)")
like "$OUT" "data=$(printf '00000003%08x%024dffffffe0' $((0x6101)) 0)" \
    "relayed over the listener: the storage URB stalled by the gateway"
gw_wait_sql gw "$ENDED" 1
is "$(gw_sql gw "SELECT mode || ' ' || iface_refused || ' ' || urbs_to_device
    FROM attachments ORDER BY id DESC LIMIT 1")" "proxy 1 1" \
    "the relayed attachment's row: 1 refused, 1 URB"
# at once, while the claim the relay used is being taken again (the
# exporter goes on in a second): the attach waits for the claim (issue
# 29: it failed "not ready (being claimed again)" before)
is "$(gw_state gw sim1:1-3)" authorized "authorized again while its claim is being taken"
is "$(gw_field gw sim1:1-3 claim)" "being taken" "... and show says its claim is being taken"
( sleep 1; kill -CONT "$(bg_pid sim)" ) &
cont=$!
gwctl gw attach sim1:1-3
is "$RC" 0 "usbgw attach while the claim is being taken again: it waits, attached directly"
kill -CONT "$(bg_pid sim)"
wait "$cont"
is "$(gw_field gw sim1:1-3 claim)" "in use" "attached: its claim is in use"
gw_wait_state gw sim1:1-3 attached
gwctl gw detach sim1:1-3
gw_wait_sql gw "$ENDED" 2
is "$(gw_sql gw "SELECT mode || ' ' || iface_refused || ' ' || urbs_to_device
    FROM attachments ORDER BY id DESC LIMIT 1")" "local 0 0" \
    "the direct attachment's row: nothing counted (not the relayed one's counters)"
gw_finish gw
done_testing
