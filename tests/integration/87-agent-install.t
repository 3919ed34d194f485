#!/usr/bin/env bash
# make install puts usbgw-agent in SBINDIR with its man page, the udev
# rule, the unit (its paths following SBINDIR) and the example
# configuration, which it does not overwrite; the example and the unit
# are good as shipped (-n; systemd-analyze rates the unit OK).
. "$(dirname "$0")/../lib/common.sh"

need_prog "$USBGW_BUILD/usbgw-agent" make
plan 16

if [ "${USBGW_ASAN:-0}" = 1 ]; then mkflags=(SANITIZE=1); else mkflags=(); fi
S=$T/stage
inst() {
	run make -s -C "$TOP" -o all install DESTDIR="$S" PREFIX=/opt/usbgw \
	    SYSCONFDIR=/opt/usbgw/etc B="$(basename "$USBGW_BUILD")" "${mkflags[@]}"
}
inst
is "$RC" 0 "make install DESTDIR=... PREFIX=/opt/usbgw" || _diag_output
ok "usbgw-agent in PREFIX/sbin" test -x "$S/opt/usbgw/sbin/usbgw-agent"
ok "usbgw-agent(8) installed" test -f "$S/opt/usbgw/share/man/man8/usbgw-agent.8"
ok "usbgw-attach in PREFIX/sbin" test -x "$S/opt/usbgw/sbin/usbgw-attach"
ok "usbgw-attach(8) installed" test -f "$S/opt/usbgw/share/man/man8/usbgw-attach.8"
rules=$S/opt/usbgw/lib/udev/rules.d/70-usbgw-agent.rules
ok "udev rule installed" test -f "$rules"
like "$(grep -v '^#' "$rules")" 'ENV\{DEVTYPE\}=="usb_device", ATTR\{bDeviceClass\}!="09", GROUP="usbgw-agent", MODE="0660"' \
    "... every non-hub usb_device to group usbgw-agent, 0660"
unit=$S/opt/usbgw/lib/systemd/system/usbgw-agent.service
ok "unit installed" test -f "$unit"
like "$(cat "$unit")" 'ExecStart=/opt/usbgw/sbin/usbgw-agent -f ' "... ExecStart follows SBINDIR"
like "$(cat "$unit")" 'ExecStopPost=\+/opt/usbgw/sbin/usbgw-agent --reattach' \
    "... --reattach as root after the agent stops"
conf=$S/opt/usbgw/etc/usbgw/usbgw-agent.conf
ok "example configuration installed" test -f "$conf"
run "$USBGW_BUILD/usbgw-agent" -n -c "$conf"
is "$RC" 0 "... and it is a good one"
echo "allow-from 10.0.0.1 # mine" >>"$conf"
inst
is "$RC" 0 "make install again"
like "$(tail -n 1 "$conf")" 'mine' "... keeps an edited configuration"
if command -v systemd-analyze >/dev/null 2>&1; then
	run systemd-analyze security --offline=true --threshold=20 \
	    "$TOP/contrib/usbgw-agent.service"
	is "$RC" 0 "systemd-analyze security: exposure at most 2.0" || _diag_output
	like "$OUT" 'Overall exposure level for usbgw-agent.service: [01]\.[0-9] OK' \
	    "rated OK"
else
	skip 2 "systemd-analyze not installed"
fi
done_testing
