# Guest-side helpers for the end-to-end scenarios (busybox sh).
#
# Results go to ttyS1, one line each, which the host turns into TAP:
#   E2E: ok - NAME | E2E: not ok - NAME | E2E: skip - NAME # REASON
#   E2E: diag TEXT | E2E: metric KEY VALUE | E2E: start | E2E: done
# Everything else (commands' output, the kernel's messages) goes to the console on
# ttyS0; the logs collected under /tmp/logs are written to ttyS2 at the end.

E2E_RES=/dev/ttyS1
E2E_LOGTTY=/dev/ttyS2
E2E_STATE=/tmp/e2e
LOGS=/tmp/logs
mkdir -p "$E2E_STATE" "$LOGS"
. /e2e/env

# Fixed identities of the gadgets (see setup_gadgets).
DISK_VID=1209 DISK_PID=0001 DISK_SERIAL=E2E-DISK-0001
LOOP_VID=1209 LOOP_PID=0002 LOOP_SERIAL=E2E-LOOP-0001
DISK2_VID=1209 DISK2_PID=0003 DISK2_SERIAL=E2E-DISK-0002
COMBO_VID=1209 COMBO_PID=0004 COMBO_SERIAL=E2E-COMBO-0001	# storage + loopback
GADGET_MANUFACTURER="usbgw e2e"
DISK_PRODUCT="E2E Mass Storage"
LOOP_PRODUCT="E2E Loopback"
DISK_IMG=/e2e/disk.img
DISK2_IMG=/tmp/disk2.img
COMBO_IMG=/tmp/combo.img
COMBO_PRODUCT="E2E Composite"

USBIPD_PORT=3240
GW_PORT=3241
GW_DIR=/tmp/gw
GW_SOCK=/run/usbgw.sock
GW_DB=$GW_DIR/usbgw.db
GW_LOG=$LOGS/usbgwd.log
GW_EXPORTER=e2e
ATTACH_TIMEOUT=60
CTL_TIMEOUT=30		# usbgw and usbip list calls
SCENARIO_TIMEOUT=${E2E_SCENARIO_TIMEOUT:-300}

e2e_emit() {
	echo "E2E: $*" > "$E2E_RES"
	echo "E2E: $*"
}
ok()     { e2e_emit "ok - $1"; }
not_ok() {
	e2e_emit "not ok - $1"
	shift
	[ $# -eq 0 ] || e2e_diag "  $*"
	touch "$E2E_STATE/failed"
}
skip()   { e2e_emit "skip - $1 # $2"; }
e2e_diag()   { e2e_emit "diag $*"; }
e2e_metric() { e2e_emit "metric $1 $2"; echo "$2" > "$E2E_STATE/metric.$1"; }

# check NAME COMMAND...: one result from a command's exit status.
check() {
	local name=$1 rc
	shift
	"$@"
	rc=$?
	if [ $rc -eq 0 ]; then
		ok "$name"
	else
		not_ok "$name" "($* exited $rc)"
	fi
	return $rc
}

# Centiseconds since boot.
e2e_uptime() { awk '{ printf "%d\n", $1 * 100 }' /proc/uptime; }

# wait_for SECONDS COMMAND...: retry every 0.1 s until COMMAND succeeds.
wait_for() {
	local end=$(( $(e2e_uptime) + $1 * 100 ))
	shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(e2e_uptime)" -lt "$end" ] || return 1
		usleep 100000
	done
}

# wait_gone SECONDS COMMAND...: retry until COMMAND fails.
wait_gone() {
	local end=$(( $(e2e_uptime) + $1 * 100 ))
	shift
	while "$@" >/dev/null 2>&1; do
		[ "$(e2e_uptime)" -lt "$end" ] || return 1
		usleep 100000
	done
}

e2e_finish() {
	{
		for f in "$LOGS"/*; do
			[ -f "$f" ] || continue
			echo "==== $f"
			cat "$f"
		done
		echo "==== dmesg"
		dmesg
	} > "$E2E_LOGTTY" 2>&1
	if [ -f "$E2E_STATE/failed" ]; then
		for f in "$GW_LOG" "$LGW_LOG"; do
			[ -f "$f" ] || continue
			echo "==== gateway log ($f)"
			cat "$f"
		done
	fi
	e2e_emit done
	sync
	reboot -f
	echo b > /proc/sysrq-trigger
}

have_prog() { grep -qx "$1" /e2e/programs; }

# --- machine setup ---------------------------------------------------------

load_modules() {
	local m
	for m in configfs usb-common usbcore udc-core dummy_hcd libcomposite \
	    usb_f_mass_storage usb_f_ss_lb scsi_mod usb-storage crct10dif_generic \
	    crc64_rocksoft_generic sd_mod usbip-core usbip-host vhci-hcd; do
		modprobe "$m" || { echo "modprobe $m failed"; return 1; }
	done
	grep -q configfs /proc/mounts || mount -t configfs none /sys/kernel/config
}

# dummy_busid N: the busid the gadget on dummy_udc.N has on its host side.
dummy_busid() {
	local d
	for d in /sys/devices/platform/dummy_hcd."$1"/usb*; do
		[ -d "$d" ] && { echo "${d##*/usb}-1"; return 0; }
	done
	return 1
}

# gadget_new NAME VID PID SERIAL PRODUCT
gadget_new() {
	local g=/sys/kernel/config/usb_gadget/$1
	mkdir -p "$g/strings/0x409" "$g/configs/c.1/strings/0x409" || return 1
	echo "0x$2" > "$g/idVendor"
	echo "0x$3" > "$g/idProduct"
	echo 0x0100 > "$g/bcdDevice"
	echo 0x0200 > "$g/bcdUSB"
	echo "$4" > "$g/strings/0x409/serialnumber"
	echo "$GADGET_MANUFACTURER" > "$g/strings/0x409/manufacturer"
	echo "$5" > "$g/strings/0x409/product"
	echo "e2e" > "$g/configs/c.1/strings/0x409/configuration"
	echo 100 > "$g/configs/c.1/MaxPower"
}

# gadget_storage NAME FILE: a mass-storage function backed by FILE.
gadget_storage() {
	local g=/sys/kernel/config/usb_gadget/$1
	mkdir "$g/functions/mass_storage.0" || return 1
	echo "$2" > "$g/functions/mass_storage.0/lun.0/file" || return 1
	ln -s "$g/functions/mass_storage.0" "$g/configs/c.1/"
}

# gadget_loopback NAME: the loopback function of usb_f_ss_lb (bulk OUT echoed on IN).
gadget_loopback() {
	local g=/sys/kernel/config/usb_gadget/$1
	mkdir "$g/functions/Loopback.0" || return 1
	ln -s "$g/functions/Loopback.0" "$g/configs/c.1/"
}

gadget_bind()   { echo "$2" > "/sys/kernel/config/usb_gadget/$1/UDC"; }

# free_udc: a dummy_udc no gadget uses (scenarios 71, 73).
free_udc() {
	local u g used
	for u in /sys/class/udc/*; do
		u=${u##*/}
		used=0
		for g in /sys/kernel/config/usb_gadget/*/UDC; do
			[ "$(cat "$g" 2>/dev/null)" = "$u" ] && used=1
		done
		[ $used = 0 ] && { echo "$u"; return 0; }
	done
	return 1
}
gadget_unbind() { echo "" > "/sys/kernel/config/usb_gadget/$1/UDC"; }

# usb_dev_is BUSID VID PID: the device at BUSID has that vendor:product.
usb_dev_is() {
	[ "$(cat "/sys/bus/usb/devices/$1/idVendor" 2>/dev/null)" = "$2" ] &&
	[ "$(cat "/sys/bus/usb/devices/$1/idProduct" 2>/dev/null)" = "$3" ]
}

# bench_leftovers: what a 68 cut short by its time limit can leave behind,
# undone: usbipd held (SIGSTOP) or stopped, the gateway and the gadgets'
# file-storage threads pinned to one vCPU.
bench_leftovers() {
	local all p
	all=$(( (1 << $(grep -c '^processor' /proc/cpuinfo)) - 1 ))
	[ -f "$E2E_STATE/usbipd.pid" ] &&
		kill -CONT "$(cat "$E2E_STATE/usbipd.pid")" 2>/dev/null
	[ -f "$E2E_STATE/usbgwd.pid" ] &&
		taskset -a -p "$all" "$(cat "$E2E_STATE/usbgwd.pid")" >/dev/null 2>&1
	for p in $(kthread_pids file-storage); do
		taskset -p "$all" "$p" >/dev/null 2>&1
	done
	start_usbipd
}

# kthread_pids NAME...: the pids of the processes (kernel threads) with those
# names.
kthread_pids() {
	local p c n
	for p in /proc/[0-9]*; do
		c=$(cat "$p/comm" 2>/dev/null) || continue
		for n in "$@"; do [ "$c" = "$n" ] && echo "${p#/proc/}"; done
	done
}

start_usbipd() {
	[ -f "$E2E_STATE/usbipd.pid" ] && proc_alive "$(cat "$E2E_STATE/usbipd.pid")" &&
		return 0
	usbipd -4 --tcp-port "$USBIPD_PORT" >> "$LOGS/usbipd.log" 2>&1 &
	echo $! > "$E2E_STATE/usbipd.pid"
	wait_for 10 sh -c "netstat -ltn | grep -q ':$USBIPD_PORT '"
}

# --- vhci side ---------------------------------------------------------------

# usbip_attach PORT BUSID: the stock client, bounded in time.
usbip_attach() {
	timeout "$ATTACH_TIMEOUT" usbip --tcp-port "$1" attach -r 127.0.0.1 -b "$2"
}

# Ports of vhci_hcd in use (any state but free), as usbip detach -p wants them.
vhci_used_ports() {
	cat /sys/devices/platform/vhci_hcd.0/status* 2>/dev/null |
		awk '($1 == "hs" || $1 == "ss") && $3 != "004" { print $2 + 0 }'
}
vhci_any_used() { [ -n "$(vhci_used_ports)" ]; }
vhci_detach_all() {
	local p
	for p in $(vhci_used_ports); do
		usbip detach -p "$p"
	done
}

# vhci_disk: the name of a SCSI disk that sits on vhci_hcd (fails if none).
vhci_disk() {
	local b
	for b in /sys/block/sd*; do
		[ -e "$b" ] || continue
		case $(readlink -f "$b") in
		*/vhci_hcd*) echo "${b##*/}"; return 0 ;;
		esac
	done
	return 1
}
# A vhci disk that has its capacity (the SCSI scan finished).
vhci_disk_ready() {
	local d
	d=$(vhci_disk) || return 1
	[ -b "/dev/$d" ] && [ "$(cat "/sys/block/$d/size")" -gt 0 ]
}

# vhci_usbdev VID PID: sysfs path of a USB device on vhci_hcd with that id.
vhci_usbdev() {
	local d
	for d in /sys/bus/usb/devices/*; do
		[ -f "$d/idVendor" ] || continue
		case $(readlink -f "$d") in */vhci_hcd*) ;; *) continue ;; esac
		[ "$(cat "$d/idVendor")" = "$1" ] && [ "$(cat "$d/idProduct")" = "$2" ] &&
			{ readlink -f "$d"; return 0; }
	done
	return 1
}
usbdev_node() {	# usbdev_node SYSFSDIR: its /dev/bus/usb node
	printf '/dev/bus/usb/%03d/%03d\n' "$(cat "$1/busnum")" "$(cat "$1/devnum")"
}

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# disk_sha DEV: SHA-256 of a whole block device, read past the page cache.
disk_sha() {
	drop_caches
	dd if="/dev/$1" bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1
}
file_sha() { sha256sum "$1" | cut -d' ' -f1; }

# disk_read_mbps DEV: read the whole device (direct I/O), print MB/s (1 MB = 2^20 B).
disk_read_mbps() {
	local t0 t1 bytes
	drop_caches
	bytes=$(( $(cat "/sys/block/$1/size") * 512 ))
	t0=$(e2e_uptime)
	dd if="/dev/$1" of=/dev/null bs=1M iflag=direct 2>/dev/null || return 1
	t1=$(e2e_uptime)
	awk -v b="$bytes" -v cs=$((t1 - t0)) 'BEGIN {
		if (cs < 1) cs = 1; printf "%.2f\n", b / 1048576 / (cs / 100) }'
}

# disk_write_lands DEV IMAGE LBA4K: write a random 4 KiB block through DEV at 4 KiB
# block LBA4K, check it in the backing IMAGE, then restore the original block and
# check that too.  Prints what went wrong.
disk_write_lands() {
	local dev=$1 img=$2 blk=$3 t=$E2E_STATE/wl
	dd if="$img" of="$t.orig" bs=4096 skip="$blk" count=1 2>/dev/null
	dd if=/dev/urandom of="$t.new" bs=4096 count=1 2>/dev/null
	cmp -s "$t.orig" "$t.new" && { echo "random block equals original"; return 1; }
	dd if="$t.new" of="/dev/$dev" bs=4096 seek="$blk" count=1 oflag=direct conv=fsync \
		2>/dev/null || { echo "write to /dev/$dev failed"; return 1; }
	dd if="$img" of="$t.got" bs=4096 skip="$blk" count=1 2>/dev/null
	cmp -s "$t.new" "$t.got" || { echo "written block not in $img"; return 1; }
	dd if="$t.orig" of="/dev/$dev" bs=4096 seek="$blk" count=1 oflag=direct conv=fsync \
		2>/dev/null || { echo "restoring write failed"; return 1; }
	dd if="$img" of="$t.got" bs=4096 skip="$blk" count=1 2>/dev/null
	cmp -s "$t.orig" "$t.got" || { echo "restored block not in $img"; return 1; }
}

# --- gateway -----------------------------------------------------------------

# gw_missing: why the gateway scenarios cannot run (nothing if they can).
gw_missing() {
	local p
	for p in usbgwd usbgw e2e-json; do
		have_prog "$p" || { echo "$p not built"; return 0; }
	done
}

# skip_all REASON NAME...
skip_all() {
	local why=$1
	shift
	for n in "$@"; do
		skip "$n" "$why"
	done
}

gwctl() { timeout "$CTL_TIMEOUT" usbgw -s "$GW_SOCK" "$@"; }

gw_running() {
	[ -f "$E2E_STATE/usbgwd.pid" ] && proc_alive "$(cat "$E2E_STATE/usbgwd.pid")"
}

# gw_start: usbgwd in the foreground (in the background of this shell), proxy
# mode on 127.0.0.1:GW_PORT; wait until its control socket answers.
gw_start() {
	gw_running && return 0
	mkdir -p "$GW_DIR"
	usbgwd -f -c /e2e/usbgwd.conf -d "$GW_DB" -s "$GW_SOCK" -l "127.0.0.1:$GW_PORT" \
		>> "$GW_LOG" 2>&1 &
	echo $! > "$E2E_STATE/usbgwd.pid"
	wait_for 15 gwctl list --json || { echo "usbgwd does not answer on $GW_SOCK"; return 1; }
}

# gw_field EXPORTER_BUSID FIELD: a field of the device the gateway lists for that
# busid of the e2e exporter.
gw_field() {
	gwctl list --json > "$E2E_STATE/list.json" 2>>"$LOGS/usbgw.log" || return 1
	e2e-json get "$2" exporter="$GW_EXPORTER" exporter_busid="$1" < "$E2E_STATE/list.json"
}
gw_state() { gw_field "$1" state; }

# gw_wait_state SECONDS EXPORTER_BUSID STATE...: until the device is in one of
# the states; prints the last state seen.
gw_state_in() {
	local s want=$1
	shift
	s=$(gw_state "$want") || s=absent
	echo "$s" > "$E2E_STATE/last_state"
	for w in "$@"; do
		[ "$s" = "$w" ] && return 0
	done
	return 1
}
gw_wait_state() {
	local secs=$1 rc
	shift
	wait_for "$secs" gw_state_in "$@"
	rc=$?
	if [ $rc -ne 0 ]; then
		# For the console: what the gateway shows when the wait failed.
		echo "gw_wait_state $*: gave up after $secs s; usbgw list --json:" >&2
		cat "$E2E_STATE/list.json" >&2
	fi
	cat "$E2E_STATE/last_state"
	return $rc
}

# --- small predicates for check/wait_for (functions, not sh -c: they must see
# this library) ------------------------------------------------------------------

fails() { ! "$@"; }
no_vhci_device() { ! vhci_disk >/dev/null && ! vhci_any_used; }
usbipd_lists() { timeout "$CTL_TIMEOUT" usbip list -r 127.0.0.1 2>/dev/null | grep -q " $1:"; }
# What usbip attach -b accepts: 1..31 bytes (a 32-byte field), no blanks.
busid_ok() {
	[ ${#1} -ge 1 ] && [ ${#1} -le 31 ] || return 1
	case $1 in *" "*|*"	"*) return 1 ;; esac
}
# attach_refused PORT BUSID: usbip attach fails.  An empty busid (the gateway did
# not list the device) is a failure of the check, not a refusal.
attach_refused() {
	[ -n "$2" ] || { echo "attach_refused: no busid to try"; return 1; }
	! usbip_attach "$1" "$2"
}
# The gateway's USB/IP port answers a device list request.
gw_answers_devlist() { timeout "$CTL_TIMEOUT" usbip --tcp-port "$GW_PORT" list -r 127.0.0.1; }
# ensure_bound BUSID: the device is bound to usbip-host (exported by usbipd),
# whichever scenario ran before.
ensure_bound() {
	[ -e "/sys/bus/usb/drivers/usbip-host/$1" ] || usbip bind -b "$1"
}
# proc_alive PID: running and not a zombie (an orphan's zombie waits for init,
# which is this shell script, to reap it).
proc_alive() {
	[ -r "/proc/$1/stat" ] || return 1
	case $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) in
	Z|X|"") return 1 ;;
	esac
}

# --- local-mode gateway (scenarios 50-59) ----------------------------------------
# A second usbgwd with mode = local: its own database, control socket, USB/IP
# port and log.  It attaches approved devices to this guest's vhci_hcd itself.
# While it runs, the proxy gateway has no exporter (50 removes it, 59 adds it
# back), so only one gateway ever claims the gadgets at usbipd.

LGW_PORT=3243
LGW_DIR=/tmp/lgw
LGW_SOCK=/run/usbgw-local.sock
LGW_LOG=$LOGS/usbgwd-local.log
LGW_EXPORTER=el
VHCI_DIR=/sys/devices/platform/vhci_hcd.0

# lgw_use: gwctl, gw_field, gw_state and gw_wait_state talk to the local-mode
# gateway from here on (in this scenario's shell).
lgw_use() {
	GW_SOCK=$LGW_SOCK
	GW_EXPORTER=$LGW_EXPORTER
}

# proxy_let_go: the proxy gateway (20-40), if it runs, releases every gadget it
# holds: its exporter is removed (once; 59 adds it back).
proxy_let_go() {
	[ -f "$E2E_STATE/proxy_exporter_removed" ] && return 0
	gw_running || return 0
	timeout "$CTL_TIMEOUT" usbgw -s "$GW_SOCK" exporter remove "$GW_EXPORTER" || return 1
	touch "$E2E_STATE/proxy_exporter_removed"
}

lgw_running() {
	[ -f "$E2E_STATE/lgw.pid" ] && proc_alive "$(cat "$E2E_STATE/lgw.pid")"
}

# lgw_start NAME [CONFIG-LINE...]: a local-mode usbgwd on a fresh database
# $LGW_DIR/NAME.db, with the config lines given after the common ones; wait
# until its control socket answers.
lgw_start() {
	local name=$1 l
	shift
	lgw_running && { echo "lgw_start: a local-mode usbgwd runs already"; return 1; }
	mkdir -p "$LGW_DIR"
	rm -f "$LGW_DIR/$name".db*
	{
		echo "mode = local"
		echo "poll-interval = 500ms"
		echo "attach-pending-wait = 0"
		echo "log-level = debug"
		echo "pid-file = none"
		for l in "$@"; do
			echo "$l"
		done
	} > "$LGW_DIR/$name.conf"
	lgw_launch "$name" starting
}

# lgw_restart NAME: start the local-mode usbgwd again on its database and
# config from lgw_start NAME.
lgw_restart() {
	lgw_running && { echo "lgw_restart: a local-mode usbgwd runs already"; return 1; }
	lgw_launch "$1" restarting
}

# lgw_launch NAME WHAT: run usbgwd on $LGW_DIR/NAME.{conf,db}; wait until its
# control socket answers.
lgw_launch() {
	echo "==== usbgwd ($1) $2 at $(e2e_uptime)" >> "$LGW_LOG"
	usbgwd -f -c "$LGW_DIR/$1.conf" -d "$LGW_DIR/$1.db" -s "$LGW_SOCK" \
		-l "127.0.0.1:$LGW_PORT" >> "$LGW_LOG" 2>&1 &
	echo $! > "$E2E_STATE/lgw.pid"
	wait_for 15 timeout "$CTL_TIMEOUT" usbgw -s "$LGW_SOCK" list --json ||
		{ echo "usbgwd ($1) does not answer on $LGW_SOCK"; return 1; }
}

# lgw_attach BUSID: usbgw attach, retried for up to 15 s while the gateway
# answers that the device is not ready (its claim is being made again after a
# detach); fails with the gateway's answer on any other refusal.
lgw_attach_once() {
	local out rc
	out=$(gwctl attach "$1" 2>&1)
	rc=$?
	echo "$rc $out" > "$E2E_STATE/attach.out"
	case $rc:$out in
	0:*)		return 0 ;;
	*"not ready"*)	return 1 ;;
	esac
	return 0
}
lgw_attach() {
	local rc out
	wait_for 15 lgw_attach_once "$1"
	read -r rc out < "$E2E_STATE/attach.out"
	[ "$rc" = 0 ] || { echo "usbgw attach $1: exit $rc: $out"; return 1; }
}

# lgw_stop: SIGTERM to the local-mode usbgwd, wait until it is gone.
lgw_stop() {
	local pid
	pid=$(cat "$E2E_STATE/lgw.pid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null
	wait_gone 15 proc_alive "$pid" || return 1
	rm -f "$E2E_STATE/lgw.pid"
}

# json_member KEY: the value of a number or string member KEY of the one-line
# JSON object on stdin (e2e-json prints nested objects compact).
json_member() {
	sed -n 's/.*"'"$1"'": *"\{0,1\}\([^",}]*\).*/\1/p'
}

# gw_local EXPORTER_BUSID KEY: a member of the device's "local" object.
gw_local() {
	gw_field "$1" local | json_member "$2"
}

# vhci_port_line PORT: the status line of a vhci port.
vhci_port_line() {
	cat "$VHCI_DIR"/status* | awk -v p="$1" '($1 == "hs" || $1 == "ss") && $2 + 0 == p'
}

# vhci_port_is PORT STA: the port's status shows that sta (004 free, 006 in use).
vhci_port_is() {
	[ "$(vhci_port_line "$1" | awk '{ print $3 }')" = "$2" ]
}

# usb_devid BUSID: the devid usbip uses for a device, (busnum << 16) | devnum, as
# the 8 hex digits of a vhci status line.
usb_devid() {
	printf '%08x\n' $(( $(cat "/sys/bus/usb/devices/$1/busnum") << 16 |
		$(cat "/sys/bus/usb/devices/$1/devnum") ))
}

# vhci_roothubs: the root hubs' sysfs directories of every vhci controller.
vhci_roothubs() {
	local d
	for d in /sys/devices/platform/vhci_hcd.*/usb*; do
		[ -f "$d/authorized_default" ] && echo "$d"
	done
}

# vhci_roothubs_read ATTR: how many vhci root hubs have each value of ATTR, as
# "COUNTxVALUE" joined by commas ("16x0" when all 16 read 0).
vhci_roothubs_read() {
	local h
	for h in $(vhci_roothubs); do
		cat "$h/$1"
	done | sort | uniq -c | awk '{ v = v (v == "" ? "" : ",") $1 "x" $2 } END { print v }'
}

# vhci_roothubs_save / vhci_roothubs_restore: the lock-down attributes as they
# were before a gateway changed them (usbgwd leaves them as it set them).
vhci_roothubs_save() {
	local h
	for h in $(vhci_roothubs); do
		echo "$h $(cat "$h/authorized_default") $(cat "$h/interface_authorized_default")"
	done > "$E2E_STATE/roothubs"
}
vhci_roothubs_restore() {
	local h a i
	[ -f "$E2E_STATE/roothubs" ] || return 0
	while read -r h a i; do
		echo "$a" > "$h/authorized_default" || return 1
		echo "$i" > "$h/interface_authorized_default" || return 1
	done < "$E2E_STATE/roothubs"
}

# dmesg_mark / dmesg_since: the kernel messages after a mark.
dmesg_mark() { dmesg | wc -l > "$E2E_STATE/dmesg.mark"; }
dmesg_since() { dmesg | tail -n +$(( $(cat "$E2E_STATE/dmesg.mark") + 1 )); }
dmesg_has() { dmesg_since | grep -q -- "$1"; }	# dmesg_has TEXT: since the mark

# audit_detail ACTION [KEY=VALUE...]: the detail of the first audit row with
# that action (and those members), from usbgw audit --json.
audit_detail() {
	local a=$1
	shift
	gwctl audit --json > "$E2E_STATE/audit.json" 2>>"$LOGS/usbgw.log" || return 1
	e2e-json get detail action="$a" "$@" < "$E2E_STATE/audit.json"
}

# --- usbgw-agent (scenarios 60-69) ---------------------------------------------
# The thin client's exporter on libusb (protocol.md 1.9), run unprivileged as
# usbgw-agent (uid/gid 990, made by mkinitramfs.sh) on 127.0.0.1:3244 and
# declared to the proxy gateway as exporter agent1.  Its gadgets sit on
# dummy_udc.3-.6; usbipd's (.0-.2) are kept local by via-port lines.  udevd
# runs from 60 on, as initramfs-tools starts it: Debian's libusb learns
# hot-plug from the udev monitor, and the agent's udev rule gives its group
# the device nodes.

AGENT_USER=usbgw-agent AGENT_UID=990 AGENT_GID=990
AGENT_PORT=3244
AGENT_DIR=/tmp/agent
AGENT_LOG=$LOGS/usbgw-agent.log
AGENT_EXPORTER=agent1
AGENT_DISK_IMG=/tmp/agent-disk.img
ADISK_UDC=3 ADISK_VID=1209 ADISK_PID=0005 ADISK_SERIAL=E2E-ADISK-0001
KBD_UDC=4   KBD_VID=1209   KBD_PID=0006   KBD_SERIAL=E2E-KBD-0001
ACM_UDC=5   ACM_VID=1209   ACM_PID=0007   ACM_SERIAL=E2E-ACM-0001
KEEP_UDC=6  KEEP_VID=1209  KEEP_PID=0008  KEEP_SERIAL=KEEP
# A USB HID boot keyboard's report descriptor (HID 1.11 appendix E.6): 8-byte
# input reports (modifiers, reserved, six key codes), a 1-byte LED output.
KBD_REPORT_DESC='\005\001\011\006\241\001\005\007\031\340\051\347\025\000\045\001\165\001\225\010\201\002\225\001\165\010\201\003\225\005\165\001\005\010\031\001\051\005\221\002\225\001\165\003\221\003\225\006\165\010\025\000\045\145\005\007\031\000\051\145\201\000\300'

# agent_missing: why the agent scenarios cannot run (nothing if they can).
agent_missing() {
	local why
	why=$(gw_missing)
	[ -z "$why" ] || { echo "$why"; return 0; }
	have_prog usbgw-agent || echo "usbgw-agent not built"
}

# udevd_start: systemd-udevd as initramfs-tools' init-top/udev starts it, then
# the coldplug it does.  --resolve-names=early, not initramfs-tools' never:
# with never, udevd leaves every node root's and ignores GROUP= (there is no
# user database in an initramfs; this guest has one for the agent's group).
udevd_start() {
	[ -S /run/udev/control ] && return 0
	mkdir -p /run/udev
	/lib/systemd/systemd-udevd --daemon --resolve-names=early \
		>> "$LOGS/udevd.log" 2>&1 || return 1
	udevadm trigger --type=subsystems --action=add &&
	udevadm trigger --type=devices --action=add &&
	udevadm settle --timeout=60
}

# gadget_hid NAME: a HID boot keyboard function (usb_f_hid, subclass 1,
# protocol 1); the gadget side reads and writes /dev/hidgN.
gadget_hid() {
	local f=/sys/kernel/config/usb_gadget/$1/functions/hid.usb0
	mkdir "$f" || return 1
	echo 1 > "$f/subclass" && echo 1 > "$f/protocol" && echo 8 > "$f/report_length" &&
	printf "$KBD_REPORT_DESC" > "$f/report_desc" &&
	ln -s "$f" "/sys/kernel/config/usb_gadget/$1/configs/c.1/"
}

# gadget_acm NAME: a CDC ACM function (usb_f_acm): ttyGSN on the gadget side.
gadget_acm() {
	local f=/sys/kernel/config/usb_gadget/$1/functions/acm.usb0
	mkdir "$f" || return 1
	ln -s "$f" "/sys/kernel/config/usb_gadget/$1/configs/c.1/"
}
gadget_tty() { echo "ttyGS$(cat /sys/kernel/config/usb_gadget/$1/functions/acm.usb0/port_num)"; }
gadget_hidg() {
	local d
	d=$(cat /sys/kernel/config/usb_gadget/$1/functions/hid.usb0/dev) || return 1
	basename "$(readlink -f "/sys/dev/char/$d")"
}

# class_node_under CLASS PATTERN: the first /sys/class/CLASS entry whose device
# path matches PATTERN (a shell pattern: *dummy_hcd.4/*, */vhci_hcd*).
class_node_under() {
	local c
	for c in /sys/class/"$1"/*; do
		[ -e "$c/device" ] || continue
		case $(readlink -f "$c/device") in
		$2) echo "${c##*/}"; return 0 ;;
		esac
	done
	return 1
}
# disk_under PATTERN: a SCSI disk whose sysfs path matches and that has its size.
disk_under() {
	local b
	for b in /sys/block/sd*; do
		[ -e "$b" ] || continue
		case $(readlink -f "$b") in
		$1)	[ "$(cat "$b/size")" -gt 0 ] && [ -b "/dev/${b##*/}" ] || continue
			echo "${b##*/}"
			return 0 ;;
		esac
	done
	return 1
}

# iface_driver BUSID: the driver of interface BUSID:1.0 (none if unbound).
iface_driver() {
	local l
	l=$(readlink "/sys/bus/usb/devices/$1:1.0/driver" 2>/dev/null) || { echo none; return 0; }
	echo "${l##*/}"
}
iface_driver_is() { [ "$(iface_driver "$1")" = "$2" ]; }

# kbd_report_arrives HIDG HIDRAW: key 'a' pressed and released on the gadget
# (8-byte boot reports written to /dev/HIDG); the first report read on
# /dev/HIDRAW must be the press.  Prints what was read.
kbd_report_arrives() {
	local t=$E2E_STATE/kbd.read rpid got
	rm -f "$t"
	timeout 10 dd if="/dev/$2" of="$t" bs=8 count=1 2>/dev/null &
	rpid=$!
	usleep 300000
	printf '\000\000\004\000\000\000\000\000' | timeout 5 dd of="/dev/$1" bs=8 2>/dev/null
	printf '\000\000\000\000\000\000\000\000' | timeout 5 dd of="/dev/$1" bs=8 2>/dev/null
	wait $rpid
	got=$(od -An -tx1 "$t" 2>/dev/null | tr -d ' \n')
	echo "${got:-nothing}"
	[ "$got" = 0000040000000000 ]
}

# tty_oneway FROM TO TEXT: TEXT written to /dev/FROM arrives on /dev/TO (both
# raw, no echo).  Prints what arrived.
tty_oneway() {
	local t=$E2E_STATE/tty.read rpid got
	rm -f "$t"
	( stty raw -echo -echoe -echok; timeout 10 dd of="$t" bs=1 count=${#3} 2>/dev/null ) \
		< "/dev/$2" &
	rpid=$!
	usleep 300000
	( stty raw -echo -echoe -echok; printf '%s' "$3" > "/dev/$1" ) < "/dev/$1"
	wait $rpid
	got=$(cat "$t" 2>/dev/null)
	echo "${got:-nothing}"
	[ "$got" = "$3" ]
}

# as_agent_user COMMAND...: run COMMAND as the agent's user (busybox su; its
# setpriv cannot change uids).  The "--" matters: busybox su permutes its
# arguments and would take COMMAND's own -c for its own.
as_agent_user() {
	su -s /bin/sh "$AGENT_USER" -c 'exec "$@"' -- sh "$@"
}
# agent_can_open NODE: the agent's user opens the node for reading and writing.
agent_can_open() { as_agent_user sh -c ': <> "$1"' _ "$1" 2>/dev/null; }

agent_running() {
	[ -f "$E2E_STATE/agent.pid" ] && proc_alive "$(cat "$E2E_STATE/agent.pid")"
}
agent_listens() { netstat -ltn | grep -q "127.0.0.1:$AGENT_PORT "; }

# agent_conf NAME [LINE...]: $AGENT_DIR/NAME.conf with the common lines
# (usbipd's gadgets kept local by port, the loopback "KEEP" by serial, audit
# lines to a file) and then the LINEs; the built-in keep-list follows them.
agent_conf() {
	local name=$1 n l
	shift
	mkdir -p "$AGENT_DIR"
	{
		echo "# usbgw-agent in the e2e guest ($name)"
		echo "audit-log $AGENT_DIR/audit.log"
		for n in 0 1 2; do
			echo "keep-local via-port \"$(dummy_busid $n)\""
		done
		echo "keep-local serial \"$KEEP_SERIAL\""
		for l in "$@"; do
			echo "$l"
		done
	} > "$AGENT_DIR/$name.conf"
	chmod 644 "$AGENT_DIR/$name.conf"
}

# agent_start NAME: usbgw-agent -f on $AGENT_DIR/NAME.conf as the agent's user,
# -l 127.0.0.1:AGENT_PORT -a 127.0.0.1; wait until it listens.  Its runtime
# directory is made as systemd's RuntimeDirectory= would.
agent_start() {
	agent_running && { echo "agent_start: usbgw-agent runs already"; return 1; }
	mkdir -p /run/usbgw-agent
	chown "$AGENT_UID:$AGENT_GID" /run/usbgw-agent
	chmod 750 /run/usbgw-agent
	touch "$AGENT_DIR/audit.log"
	chown "$AGENT_UID:$AGENT_GID" "$AGENT_DIR/audit.log"
	echo "==== usbgw-agent ($1) starting at $(e2e_uptime)" >> "$AGENT_LOG"
	# exec all the way (subshell, su, sh), so that $! is the agent itself.
	( exec su -s /bin/sh "$AGENT_USER" -c 'exec "$@"' -- sh usbgw-agent -f -v \
		-c "$AGENT_DIR/$1.conf" -l "127.0.0.1:$AGENT_PORT" -a 127.0.0.1 \
		>> "$AGENT_LOG" 2>&1 ) &
	echo $! > "$E2E_STATE/agent.pid"
	wait_for 15 agent_listens || { echo "usbgw-agent does not listen on $AGENT_PORT"; return 1; }
}

# agent_signal SIG: signal the agent, wait until it is gone.
agent_signal() {
	local pid
	pid=$(cat "$E2E_STATE/agent.pid" 2>/dev/null) || return 0
	kill "-$1" "$pid" 2>/dev/null
	wait_gone 15 proc_alive "$pid" || return 1
	rm -f "$E2E_STATE/agent.pid"
}

# agent_declare: the proxy gateway gets the agent as exporter agent1 (--agent
# when this build's usbgw knows it: push and the control connection).
agent_declare() {
	if usbgw exporter add --help 2>&1 | grep -q -- --agent; then
		gwctl exporter add "$AGENT_EXPORTER" "127.0.0.1:$AGENT_PORT" --agent
	else
		gwctl exporter add "$AGENT_EXPORTER" "127.0.0.1:$AGENT_PORT"
	fi
}

# agent_lists BUSID: Debian's usbip list against the agent shows BUSID.
agent_lists() {
	timeout "$CTL_TIMEOUT" usbip --tcp-port "$AGENT_PORT" list -r 127.0.0.1 2>/dev/null |
		grep -q " $1:"
}
# gw_absent_or_gone BUSID: the gateway lists no such device, or lists it gone.
gw_absent_or_gone() { gw_state_in "$1" absent gone; }

# gw_live BUSID: how many devices of $GW_EXPORTER at that busid the gateway
# lists in a live state (anything but gone): a re-plugged device may be listed
# next to its gone predecessor.  Two e2e-json runs per poll: the hot-plug
# timings include the polling.
gw_live() {
	local all gone
	gwctl list --json > "$E2E_STATE/list.json" 2>>"$LOGS/usbgw.log" || return 1
	all=$(e2e-json count exporter="$GW_EXPORTER" exporter_busid="$1" < "$E2E_STATE/list.json")
	gone=$(e2e-json count exporter="$GW_EXPORTER" exporter_busid="$1" state=gone \
		< "$E2E_STATE/list.json")
	echo $(( ${all:-0} - ${gone:-0} ))
}
gw_none_live() { [ "$(gw_live "$1")" = 0 ]; }
# gw_has BUSID STATE: the gateway lists a device of $GW_EXPORTER at BUSID in STATE.
gw_has() {
	gwctl list --json > "$E2E_STATE/list.json" 2>>"$LOGS/usbgw.log" || return 1
	[ "$(e2e-json count exporter="$GW_EXPORTER" exporter_busid="$1" state="$2" \
		< "$E2E_STATE/list.json")" -gt 0 ]
}
# ms_since T0: milliseconds since e2e_uptime T0 (centisecond resolution).
ms_since() { echo $(( ($(e2e_uptime) - $1) * 10 )); }
# in_time RC MS LIMIT: a wait succeeded (RC 0) within LIMIT ms.
in_time() { [ "$1" -eq 0 ] && [ "$2" -le "$3" ]; }
