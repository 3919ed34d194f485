# Benchmark (issue 14 item 9), reported, not asserted (TCG): the same disk
# gadget read through the gateway from usbipd + usbip-host, then from the
# agent: dd iflag=direct of the whole 8 MiB disk five times each with the
# vCPUs free and five times with the thin client's side and the gateway's on
# a vCPU each, and the control-URB round trip (usbip-tc latency through the
# gateway).  The agent runs again with the built-in keep-list only: the
# keyboard stays local and never reaches the gateway.  The usbipd half runs
# without the agent too.

why=$(gw_missing)
have_prog usbip-tc || why=${why:-"usbip-tc not built"}
agent_running && why=${why:-"usbgw-agent still running (67 did not kill it)"}
if [ -n "$why" ]; then
	skip_all "$why" "bench: the disk through usbipd and the gateway" \
		"bench: the disk through the agent and the gateway" \
		"agent default keep-list: the keyboard stays local"
	return 0
fi
adisk=$(cat "$E2E_STATE/agent_busid.adisk")
kbd=$(cat "$E2E_STATE/agent_busid.kbd")

# strace_count FILE: the system calls in an strace -f log (an interrupted
# call's "resumed" line, signals and exits not counted again).
strace_count() {
	awk '!/resumed>/ && !/^[0-9]+ +(---|\+\+\+)/ { n++ } END { print n + 0 }' "$1"
}

# strace_top FILE: the most frequent calls, "name:count ...".
strace_top() {
	awk '!/resumed>/ && !/^[0-9]+ +(---|\+\+\+)/ {
		c = $2; sub(/\(.*/, "", c); n[c]++ }
		END { for (c in n) print n[c], c }' "$1" | sort -rn | head -6 |
		awk '{ printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1 }'
}

# strace_run TAG WHO:PID... -- COMMAND...: COMMAND with strace -f on each
# PID, into $E2E_STATE/strace.TAG.WHO.
strace_run() {
	local tag=$1 w spids=""
	shift
	while [ "$1" != -- ]; do
		strace -f -qq -o "$E2E_STATE/strace.$tag.${1%%:*}" -p "${1#*:}" &
		spids="$spids $!"
		shift
	done
	shift
	usleep 500000		# attached
	"$@" >/dev/null 2>&1
	usleep 200000
	for w in $spids; do kill -INT "$w" 2>/dev/null; done
	for w in $spids; do wait "$w" 2>/dev/null; done
}

# bench_syscalls NAME BUSID: with strace in the guest (E2E_STRACE=1), the
# system calls per control URB of the gateway and (agent) of the agent: the
# difference of a 120- and a 20-round-trip run, so that the import and the
# connection's end cancel out.  Untimed.
bench_syscalls() {
	local name=$1 b=$2 who p n20 n120 per pids
	command -v strace >/dev/null || return 0
	pids="gw:$(cat "$E2E_STATE/usbgwd.pid")"
	[ "$name" = agent ] && pids="$pids agent:$(cat "$E2E_STATE/agent.pid")"
	for n in 20 120; do
		gw_wait_state 15 "$adisk" authorized >/dev/null
		strace_run "$name.$n" $pids -- usbip-tc latency "127.0.0.1:$GW_PORT" "$b" \
			--kind control --iterations "$n" --warmup 0 -t 10000
	done
	for p in $pids; do
		who=${p%%:*}
		n20=$(strace_count "$E2E_STATE/strace.$name.20.$who")
		n120=$(strace_count "$E2E_STATE/strace.$name.120.$who")
		per=$(awk -v a="$n20" -v b="$n120" 'BEGIN { printf "%.1f\n", (b - a) / 100 }')
		e2e_metric "${name}_${who}_syscalls_per_control_urb" "$per"
		e2e_diag "bench $name: $who system calls per control URB $per;" \
			"120 round trips: $(strace_top "$E2E_STATE/strace.$name.120.$who")"
	done
}

# bench_read_syscalls NAME DISK: one more read (untimed) with strace on the
# agent and the gateway; per URB = per USBDEVFS_SUBMITURB of the agent's.
bench_read_syscalls() {
	local name=$1 d=$2 who urbs n per
	command -v strace >/dev/null || return 0
	[ "$name" = agent ] || return 0
	drop_caches
	strace_run "$name.read" "gw:$(cat "$E2E_STATE/usbgwd.pid")" \
		"agent:$(cat "$E2E_STATE/agent.pid")" -- \
		dd if="/dev/$d" of=/dev/null bs=1M iflag=direct
	urbs=$(grep -c 'USBDEVFS_SUBMITURB' "$E2E_STATE/strace.$name.read.agent")
	[ "${urbs:-0}" -gt 0 ] || return 0
	for who in gw agent; do
		n=$(strace_count "$E2E_STATE/strace.$name.read.$who")
		per=$(awk -v a="$n" -v u="$urbs" 'BEGIN { printf "%.1f\n", a / u }')
		e2e_metric "${name}_${who}_syscalls_per_disk_urb" "$per"
		e2e_diag "bench $name: disk read, $urbs URBs: $who system calls per URB" \
			"$per; $(strace_top "$E2E_STATE/strace.$name.read.$who")"
	done
}

# bench_perf NAME DISK: with perf in the guest (E2E_PERF=1), one more read
# (untimed) under a system-wide profile: the CPU share of each command, the
# symbols of the exporter (the agent, or usbip-host's stub_rx/stub_tx), and
# the inclusive figures of the exporter and the gateway.  For people.
bench_perf() {
	local name=$1 d=$2 f="$E2E_STATE/perf.$1"
	command -v perf >/dev/null || return 0
	drop_caches
	perf record -a -g -e cpu-clock -F 2000 -o "$f" -- \
		dd if="/dev/$d" of=/dev/null bs=1M iflag=direct 2>&1 | tail -1
	perf report -i "$f" --stdio --no-children -g none --sort comm 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -16 | sed "s/^/# perf $name comm: /"
	perf report -i "$f" --stdio --no-children -g none \
		--comm usbgw-agent,stub_rx,stub_tx --sort comm,sym 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -40 | sed "s/^/# perf $name sym: /"
	perf report -i "$f" --stdio --children -g none \
		--comm usbgw-agent,stub_rx,stub_tx,usbgwd --sort comm,sym 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -120 | sed "s/^/# perf $name incl: /"
	# The agent's own code and libraries (user space): by object, then
	# by symbol.
	[ "$name" = agent ] || return 0
	perf report -i "$f" --stdio --no-children -g none --comm usbgw-agent \
		--sort dso 2>/dev/null | grep -v '^#' | grep -v '^$' | head -12 |
		sed "s/^/# perf $name dso: /"
	perf report -i "$f" --stdio --no-children -g none --comm usbgw-agent \
		--sort dso,sym 2>/dev/null | grep -F '[.]' | head -40 |
		sed "s/^/# perf $name user: /"
}

# read_trace_on NAME, read_trace_off NAME I: with E2E_TRACE=1, around each
# timed read, system calls and scheduler switches of the gateway and the
# exporter, counted: "# rtrace NAME readI sys COMM NRn COUNT" (the gateway's
# writev count is twice the URBs the read took) and "... on COMM [CPU]
# COUNT" (where each ran).  Costs the reads some speed: for people.
read_trace_on() {
	trace_arm "$1" 8192 sched/sched_switch sched/sched_wakeup \
		raw_syscalls/sys_enter && echo 1 > /sys/kernel/tracing/tracing_on
}
read_trace_off() {
	trace_disarm || return 0
	grep -v '^#' /sys/kernel/tracing/trace | awk -v n="$1" -v i="$2" '
		/sys_enter/ { c = $1; sub(/-[0-9]+$/, "", c); s[c " NR" $7]++ }
		/sched_switch/ { c = $1; sub(/-[0-9]+$/, "", c); sw[c " " $2]++ }
		END { for (k in s) printf "# rtrace %s read%d sys %s %d\n", n, i, k, s[k]
		      for (k in sw) printf "# rtrace %s read%d on %s %d\n", n, i, k, sw[k] }'
	trace_reset
}

# trace_arm NAME KB EVENT...: ftrace ready (not yet on) for EVENTs of the
# gateway and NAME's exporter (the agent, or usbip-host's stub_rx/stub_tx),
# KB of buffer per CPU; false without tracefs.  trace_disarm: tracing off,
# the events of the last trace_arm off; false without tracefs.
trace_arm() {
	local t=/sys/kernel/tracing name=$1 kb=$2 e pids
	shift 2
	[ -d $t/events ] || mount -t tracefs nodev $t 2>/dev/null
	[ -w $t/trace ] || return 1
	pids="$(cat "$E2E_STATE/usbgwd.pid") $(exporter_pids "$name")"
	echo 0 > $t/tracing_on
	echo > $t/trace
	echo "$kb" > $t/buffer_size_kb
	echo "$pids" > $t/set_event_pid
	for e in "$@"; do
		echo 1 > $t/events/$e/enable
	done
	TRACE_EVENTS="$*"
}
trace_disarm() {
	local t=/sys/kernel/tracing e
	[ -w $t/trace ] || return 1
	echo 0 > $t/tracing_on
	for e in $TRACE_EVENTS; do
		echo 0 > $t/events/$e/enable
	done
	echo > $t/set_event_pid
}

# trace_reset: ftrace as the kernel starts it (no events, empty buffer).
trace_reset() {
	local t=/sys/kernel/tracing
	echo > $t/trace
	echo 1408 > $t/buffer_size_kb
	echo 1 > $t/tracing_on
}

# bench_trace NAME BUSID: with E2E_TRACE=1, an ftrace of 10 control round
# trips (scheduler switches and wake-ups, system calls) of the gateway and the
# exporter (the agent, or usbip-host's stub_rx/stub_tx), printed for people.
bench_trace() {
	local name=$1 b=$2 t=/sys/kernel/tracing d=${3:-}
	[ "${E2E_TRACE:-0}" = 1 ] || return 0
	trace_arm "$name" 4096 sched/sched_switch sched/sched_wakeup \
		raw_syscalls/sys_enter raw_syscalls/sys_exit || return 0
	if [ -n "$d" ]; then
		drop_caches
		echo 1 > $t/tracing_on
		dd if="/dev/$d" of=/dev/null bs=1M count=2 iflag=direct 2>/dev/null
	else
		gw_wait_state 15 "$adisk" authorized >/dev/null
		echo 1 > $t/tracing_on
		usbip-tc latency "127.0.0.1:$GW_PORT" "$b" --kind control --iterations 10 \
			--warmup 0 -t 10000 >/dev/null 2>&1
	fi
	trace_disarm
	grep -v '^#' $t/trace | tail -4000 | sed "s/^/# trace $name${d:+.read}: /"
	trace_reset
}

# usbfs_node BUSID: the device's usbfs node, /dev/bus/usb/BBB/DDD.
usbfs_node() {
	printf '/dev/bus/usb/%03d/%03d\n' "$(cat "/sys/bus/usb/devices/$1/busnum")" \
		"$(cat "/sys/bus/usb/devices/$1/devnum")"
}
# agent_maps NODE: the agent has memory of usbfs file NODE mapped (umem).
agent_maps() { grep -q " $1\$" "/proc/$(cat "$E2E_STATE/agent.pid")/maps"; }
# agent_has_fd NODE: the agent has NODE open (a descriptor or a mapping).
agent_has_fd() {
	local p
	p=$(cat "$E2E_STATE/agent.pid")
	agent_maps "$1" && return 0
	ls -l "/proc/$p/fd" 2>/dev/null | grep -q " $1\$"
}

# cpu_ticks PID...: the user + system time of the PIDs (every thread), in
# clock ticks (USER_HZ, 100 a second); cpu_uticks: the user time alone.
cpu_ticks() {
	local p t=0 f
	for p in "$@"; do
		f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		f=${f##*) }	# after "pid (comm) "
		set -- $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}
cpu_uticks() {
	local p t=0 f
	for p in "$@"; do
		f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		f=${f##*) }
		set -- $f
		t=$((t + ${12}))
	done
	echo "$t"
}

# exporter_pids NAME: the agent's pid, or usbip-host's stub_rx/stub_tx.
exporter_pids() {
	if [ "$1" = agent ]; then
		cat "$E2E_STATE/agent.pid"
	else
		kthread_pids stub_rx stub_tx
	fi
}

# Whole-disk reads per half and placement: single reads through TCG swing by
# +-20 %, so five (about 1 s each) of each for the figures (make bench-agent,
# a plain e2e run); make check's run takes one of each (E2E_BENCH_READS=1):
# every check runs, the figures are not its point.
BENCH_READS=${E2E_BENCH_READS:-5}

# bench_pin NAME split|free: where the guest's two vCPUs run what.  "free":
# wherever the scheduler puts it.  "split": the thin client and the gateway
# on a vCPU each, as they are separate machines when deployed: the thin
# client's side (NAME's exporter: the agent, or usbip-host's stub_rx and
# stub_tx; the gadget's file-storage thread) on vCPU 1, the gateway's side
# with the vhci host (the gateway, vhci_rx, vhci_tx, usb-storage, and this
# shell, so dd) on vCPU 0.  Left free, the scheduler wakes usbip-host's
# threads on the gateway's vCPU (no address-space switch: kernel threads),
# and puts the agent, a process, sometimes with the gateway, where each
# hand-off switches address spaces and TCG flushes its software TLB, and
# sometimes on the other vCPU (protocol.md 1.9.3, "Where the two vCPUs run
# what").
bench_pin() {
	local g=3 x=3 p
	[ "$2" = split ] && g=1 x=2
	for p in $(cat "$E2E_STATE/usbgwd.pid") $$ \
	    $(kthread_pids vhci_rx vhci_tx usb-storage); do
		taskset -a -p "$g" "$p" >/dev/null 2>&1 ||
			e2e_diag "bench $1: taskset $g for pid $p failed"
	done
	for p in $(exporter_pids "$1") $(kthread_pids file-storage); do
		taskset -a -p "$x" "$p" >/dev/null 2>&1 ||
			e2e_diag "bench $1: taskset $x for pid $p failed"
	done
}

# usbipd_hold NAME stop|go: usbipd holds still (SIGSTOP) while usbipd's half
# is timed.  The gateway polls it every 500 ms here (3 s by default), and
# each poll costs it a fork and a sysfs scan, ~8 % of the guest's CPU
# (E2E_PERF=1); the agent's half has no polling (the agent pushes its
# changes, and usbipd is not running).  A poll meanwhile waits in usbipd's
# listen queue and is answered after; the import is usbip-host's, in the
# kernel.  74 and 90 let a held usbipd go if 68 is cut short.
usbipd_hold() {
	[ "$1" = usbipd ] || return 0
	kill -"$([ "$2" = stop ] && echo STOP || echo CONT)" \
		"$(cat "$E2E_STATE/usbipd.pid")" 2>/dev/null
}

# bench_reads NAME DISK: BENCH_READS timed whole-disk reads in each
# placement, free first: a thread pinned once stays where it was put until
# the scheduler moves it, so free reads after split ones would not be free
# (alternating read by read gave "free" the split's figures), into
# $E2E_STATE/bench.NAME and bench.NAME_split;
# metrics NAME[_split]_readI_mbps and the CPU time per MiB read of the
# exporter and the gateway, NAME[_split]_{exporter,gw}_cpu_ms_per_mib (and
# the agent's user share).
bench_reads() {
	local name=$1 d=$2 i pl sfx mbps xp gp x0 xu0 g0 mib n
	local xt_free=0 xt_split=0 xu_free=0 xu_split=0 gt_free=0 gt_split=0
	# Whose CPU time: usbip-host's kernel threads, or the agent.
	xp=$(exporter_pids "$name")
	gp=$(cat "$E2E_STATE/usbgwd.pid")
	usbipd_hold "$name" stop
	for pl in free split; do
		sfx=; [ $pl = split ] && sfx=_split
		bench_pin "$name" $pl
		for i in $(seq 1 $BENCH_READS); do
			x0=$(cpu_ticks $xp)
			xu0=$(cpu_uticks $xp)
			g0=$(cpu_ticks "$gp")
			[ "${E2E_TRACE:-0}" = 1 ] && read_trace_on "$name"
			mbps=$(disk_read_mbps "$d")
			[ "${E2E_TRACE:-0}" = 1 ] && read_trace_off "$name$sfx" "$i"
			eval "xt_$pl=\$(( xt_$pl + $(cpu_ticks $xp) - x0 ))"
			eval "xu_$pl=\$(( xu_$pl + $(cpu_uticks $xp) - xu0 ))"
			eval "gt_$pl=\$(( gt_$pl + $(cpu_ticks "$gp") - g0 ))"
			[ -z "$mbps" ] || e2e_metric "${name}${sfx}_read${i}_mbps" "$mbps"
			echo "$mbps" >> "$E2E_STATE/bench.$name$sfx"
		done
	done
	bench_pin "$name" free
	usbipd_hold "$name" go
	for pl in free split; do
		sfx=; [ $pl = split ] && sfx=_split
		n=$(grep -c . "$E2E_STATE/bench.$name$sfx")
		check "bench $name: $BENCH_READS whole-disk reads timed, vCPUs $pl ($(tr '\n' ' ' < "$E2E_STATE/bench.$name$sfx"))" \
			[ "$n" -eq "$BENCH_READS" ]
		# CPU ms per MiB read: the exporter's and the gateway's, less
		# noisy than MB/s on a loaded host (the reads that came back).
		mib=$(( $(cat "/sys/block/$d/size") * 512 * n / 1048576 ))
		for w in exporter:$(eval echo \$xt_$pl) gw:$(eval echo \$gt_$pl); do
			e2e_metric "${name}${sfx}_${w%%:*}_cpu_ms_per_mib" \
				"$(awk -v t="${w#*:}" -v m="$mib" 'BEGIN { printf "%.1f\n", t * 10 / (m > 0 ? m : 1) }')"
		done
		[ "$name" = agent ] && e2e_metric "agent${sfx}_exporter_user_cpu_ms_per_mib" \
			"$(awk -v t="$(eval echo \$xu_$pl)" -v m="$mib" 'BEGIN { printf "%.1f\n", t * 10 / (m > 0 ? m : 1) }')"
	done
}

# bench_path NAME EXPORTER PORT: approve the disk at the gateway under
# EXPORTER, time control round trips, attach, read it BENCH_READS times with
# the vCPUs free and as many split, detach.
bench_path() {
	local name=$1 b st out d
	GW_EXPORTER=$2
	# Up to 75 s: the agent has been down since 67, through usbipd's
	# whole half, and the gateway retries a down exporter with back-off
	# up to 60 s (it came back 64 s after the kill, 34 s into this wait).
	st=$(gw_wait_state 75 "$adisk" pending)
	check "bench $name: the gateway claims $GW_EXPORTER:$adisk, pending (last seen: $st)" \
		[ "$st" = pending ] || return 1
	b=$(gw_field "$adisk" busid)
	gwctl approve "$b" >/dev/null
	gw_wait_state 10 "$adisk" authorized >/dev/null
	usbipd_hold "$name" stop
	out=$(usbip-tc latency "127.0.0.1:$GW_PORT" "$b" --kind control --iterations 200 \
		--warmup 20 -t 10000 2>&1 | grep '^RESULT')
	usbipd_hold "$name" go
	echo "$out"
	for k in median_us p99_us; do
		v=$(echo "$out" | sed -n "s/.* $k=\([0-9.]*\).*/\1/p")
		[ -z "$v" ] || e2e_metric "${name}_control_urb_${k}" "$v"
	done
	check "bench $name: control URB round trips through the gateway timed ($out)" [ -n "$out" ]
	bench_syscalls "$name" "$b"
	bench_trace "$name" "$b"
	gw_wait_state 15 "$adisk" authorized >/dev/null
	usbip_attach "$GW_PORT" "$b"
	if check "bench $name: the disk attaches through the gateway" wait_for 30 vhci_disk_ready; then
		d=$(vhci_disk)
		# The vhci host's own reads of the new disk (udev's blkid
		# probe) end before the timed ones start, on both halves: they
		# came 0.3 s after the attach, inside the agent's first read
		# (96 URBs more than its second, E2E_TRACE=1), and before
		# usbipd's (its kernel threads' look-up took ~3 s).  udev has
		# the disk in its database once its ADD event is processed.
		wait_for 10 test -e "/run/udev/data/b$(cat "/sys/block/$d/dev")" ||
			e2e_diag "bench $name: udev has no record of $d after 10 s"
		udevadm settle --timeout=30 ||
			e2e_diag "bench $name: udevadm settle: exit $?"
		bench_reads "$name" "$d"
		bench_read_syscalls "$name" "$d"
		bench_trace "$name" "$b" "$d"
		[ "$name" = agent ] && check "bench agent: zero-copy: the agent has usbfs mappings of the disk ($(usbfs_node "$adisk")) after the reads" \
			agent_maps "$(usbfs_node "$adisk")"
		bench_perf "$name" "$d"
	fi
	vhci_detach_all
	wait_gone 15 vhci_disk
	wait_gone 10 vhci_any_used
}

# Each half runs with only its own exporter: the agent is not running during
# usbipd's half, and usbipd is stopped during the agent's (the gateway polls
# it every 500 ms here, and each poll costs it a fork and a sysfs scan: ~8 %
# of the guest's CPU during the agent's reads, protocol.md 1.9.3); during
# usbipd's own reads it is held (SIGSTOP), so neither half carries polling.

# The guest's clock source and page-table isolation: each read of a clock
# that is not the TSC (hpet, acpi_pm) is an emulated device access under TCG,
# and PTI makes every system call switch page tables; both weigh on the path
# with more system calls.  For people.
e2e_diag "bench: clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)," \
	"meltdown: $(cat /sys/devices/system/cpu/vulnerabilities/meltdown 2>/dev/null)," \
	"spectre_v2: $(cat /sys/devices/system/cpu/vulnerabilities/spectre_v2 2>/dev/null)"

# 1. usbipd + usbip-host (the gateway's exporter e2e).  The disk's id must
# wait for an operator, not meet 40's storage block (61 adds the same rule).
rm -f "$E2E_STATE"/bench.*
[ -f "$E2E_STATE/agent_ask_rule" ] ||
	check "bench: usbgw policy insert 1 'ask id $ADISK_VID:$ADISK_PID'" \
		gwctl policy insert 1 "ask id $ADISK_VID:$ADISK_PID"
touch "$E2E_STATE/agent_ask_rule"
check "bench usbipd: usbip bind -b $adisk" usbip bind -b "$adisk"
bench_path usbipd "$GW_EXPORTER"
GW_EXPORTER=e2e
check "bench usbipd: usbip unbind -b $adisk" usbip unbind -b "$adisk"
wait_for 15 gw_none_live "$adisk"
# A fresh enumeration, with its local driver, for the agent.
gadget_unbind adisk
usleep 500000
gadget_bind adisk "dummy_udc.$ADISK_UDC"
check "bench: the disk is a local disk again (usb-storage)" \
	wait_for 30 disk_under "*/dummy_hcd.$ADISK_UDC/*"

# 2. the agent, with the built-in keep-list (no export line for the keyboard).
why=$(agent_missing)
if [ -n "$why" ]; then
	skip_all "$why" "bench: the disk through the agent and the gateway" \
		"agent default keep-list: the keyboard stays local"
	return 0
fi
# The keyboard enumerates afresh too, so that usbhid holds it whatever 67 left.
gadget_unbind kbd
usleep 500000
gadget_bind kbd "dummy_udc.$KBD_UDC"
check "agent default keep-list: the keyboard has usbhid before the agent starts" \
	wait_for 15 iface_driver_is "$kbd" usbhid
agent_conf default
check "agent default keep-list: usbgw-agent starts again" agent_start default
# Without the other exporter (see above); usbipd comes back after the half.
kill "$(cat "$E2E_STATE/usbipd.pid")" 2>/dev/null
wait_gone 10 sh -c "netstat -ltn | grep -q ':$USBIPD_PORT '"
bench_path agent "$AGENT_EXPORTER"
check "bench: usbipd runs again after the agent's half" start_usbipd
# The gateway polled it with back-off while it was down (up to 60 s): the
# scenarios after this one find the usbipd exporter up.
e2e_up() {
	[ "$(gwctl exporter list --json 2>/dev/null |
	    e2e-json get status name=e2e 2>/dev/null)" = up ]
}
check "bench: the gateway has the usbipd exporter up again" wait_for 75 e2e_up

# The ratio of the means, agent over usbipd, for each placement (each
# half's reads from its own file; a failed read is left out, not counted as
# 0): agent_vs_usbipd_read_ratio with the vCPUs free, and ..._split with the
# thin client's side and the gateway's on a vCPU each.  With E2E_TRACE=1 the
# timed reads were traced (the agent makes system calls, usbip-host's
# threads none): reported as a diagnostic only.
mean_mbps() { awk 'NF { s += $1; n++ } END { if (n) printf "%.3f\n", s / n }' "$1" 2>/dev/null; }
for sfx in "" _split; do
	u=$(mean_mbps "$E2E_STATE/bench.usbipd$sfx")
	a=$(mean_mbps "$E2E_STATE/bench.agent$sfx")
	[ -n "$u" ] && [ -n "$a" ] || continue
	r=$(awk -v u="$u" -v a="$a" 'BEGIN { printf "%.2f\n", (u > 0 ? a / u : 0) }')
	[ "${E2E_TRACE:-0}" = 1 ] || e2e_metric "agent_vs_usbipd_read_ratio$sfx" "$r"
	e2e_diag "bench: disk read through the gateway, vCPUs $([ -n "$sfx" ] && echo split || echo free):" \
		"usbipd $(tr '\n' ' ' < "$E2E_STATE/bench.usbipd$sfx")MB/s," \
		"agent $(tr '\n' ' ' < "$E2E_STATE/bench.agent$sfx")MB/s, ratio $r (goal >= 0.8)" \
		"$([ "${E2E_TRACE:-0}" = 1 ] && echo "(reads traced, E2E_TRACE=1: not comparable)")"
done

# The built-in keep-list keeps the boot keyboard local.
GW_EXPORTER=$AGENT_EXPORTER
check "agent default keep-list: the keyboard keeps usbhid ($(iface_driver "$kbd"))" \
	iface_driver_is "$kbd" usbhid
check "agent default keep-list: the agent does not offer the keyboard $kbd" fails agent_lists "$kbd"
check "agent default keep-list: audit keep-local line for $kbd" \
	grep -q "audit: keep-local busid=$kbd " "$AGENT_LOG"
check "agent default keep-list: the keyboard never reaches the gateway" gw_none_live "$kbd"

# The zero-copy buffers end with the device: unplugged (the gadget unbound),
# the agent unmaps them and closes the usbfs file; plugged in again, it is
# claimed and offered afresh.
node=$(usbfs_node "$adisk")
gadget_unbind adisk
check "bench agent: unplugged, the agent lets go of the usbfs file $node (no mapping, no descriptor)" \
	wait_gone 5 agent_has_fd "$node"
gadget_bind adisk "dummy_udc.$ADISK_UDC"
st=$(gw_wait_state 20 "$adisk" pending)
check "bench agent: plugged in again, the agent offers it and the gateway has it pending ($st)" \
	[ "$st" = pending ]

# What copying costs in this guest, to read the CPU figures by (TCG runs
# rep movsb, which the kernel's copy_to_user and glibc's large memcpy use,
# one byte per step): 50 MiB through a pipe, three kernel copies of each
# byte (clear_user from /dev/zero, into the pipe, out of it).
t0=$(e2e_uptime)
dd if=/dev/zero bs=128k count=400 2>/dev/null | cat > /dev/null
t1=$(e2e_uptime)
e2e_metric guest_pipe_mib_per_s "$(awk -v cs=$((t1 - t0)) 'BEGIN {
	if (cs < 1) cs = 1; printf "%.1f\n", 50 / (cs / 100) }')"
