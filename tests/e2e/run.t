#!/bin/bash
# Real-kernel end-to-end test: boot Debian's kernel in qemu (TCG, no network
# device) with an initramfs holding busybox, usbip, the kernel's gadget/usbip
# modules and this build's programs; the guest runs tests/e2e/scenarios/*.sh in one
# boot and reports each check; this script turns them into TAP.
#
# Environment:
#   USBGW_BUILD   build folder with usbgwd, usbgw, usbgw-agent, usbip-tc, e2e-json,
#                 e2e-bulk (default build/)
#   E2E_CACHE     download cache (default tests/e2e/cache)
#   E2E_TIMEOUT   seconds the whole boot may take (default 1200)
#   E2E_BOOT_TIMEOUT  seconds until the guest must have started init (default 120)
#   E2E_ONLY      scenario file prefixes to run, e.g. "00 10" (default: all)
#   E2E_KERNEL    vmlinux (PVH entry, default) or bzimage
#   E2E_BREAK     corrupt-disk | no-approve | no-lockdown: break checks on purpose
#   E2E_OUT       where the logs go (default $USBGW_BUILD/e2e)
#   E2E_VERBOSE=1 print the guest's console even when everything passed
#   CI            when set, a missing qemu is a failure, not a skip
#   E2E_STRACE=1 copy the host's strace into the guest: 68-agent-bench then
#                 counts the agent's and the gateway's system calls per URB
#   E2E_PERF=1   copy the host's perf into the guest: 68-agent-bench then
#                 profiles one disk read per path (# perf lines in the console)
#   E2E_BENCH_READS  timed whole-disk reads per half and placement in
#                 68-agent-bench (default 5; make check takes 1)
#   E2E_AUDIO=0   leave out QEMU's usb-audio on a qemu-xhci (on by default:
#                 ISO through the agent, 72-agent-iso, and the count of the
#                 non-silent frames of its wav file)
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${USBGW_BUILD:-$top/build}
out=${E2E_OUT:-$build/e2e}
timeout_s=${E2E_TIMEOUT:-1200}
boot_timeout_s=${E2E_BOOT_TIMEOUT:-120}
qemu=${E2E_QEMU:-qemu-system-x86_64}
export USBGW_BUILD=$build

n=0
failed=0
tap_ok()   { n=$((n + 1)); echo "ok $n - $*"; }
tap_fail() { n=$((n + 1)); echo "not ok $n - $*"; failed=$((failed + 1)); }
tap_skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
diag()     { echo "# $*"; }
ediag()    { sed 's/^/# /' >&2; }	# a file's lines as diagnostics prove shows

bail_setup() {	# bail_setup WHAT LOGFILE
	tap_fail "$1"
	[ -f "$2" ] && ediag < "$2"
	echo "1..$n"
	exit 1
}

if ! command -v "$qemu" >/dev/null; then
	if [ -n "${CI:-}" ]; then
		echo "1..1"
		echo "not ok 1 - $qemu installed (tests/deps.sh installs qemu-system-x86)"
		exit 1
	fi
	echo "1..0 # SKIP $qemu not found (tests/deps.sh installs qemu-system-x86)"
	exit 0
fi

mkdir -p "$out"
rm -f "$out"/console.log "$out"/results.log "$out"/logs.log "$out"/metric.* "$out"/audio.wav
t_start=$(date +%s)

# 1. downloads (cached), 2. initramfs.
if ! manifest=$("$here/fetch.sh" 2>"$out/fetch.log" | tail -n 1) || [ ! -f "$manifest" ]; then
	bail_setup "download and unpack Debian's kernel, busybox, usbip (fetch.sh)" "$out/fetch.log"
fi
# shellcheck disable=SC1090
. "$manifest"
if ! "$here/mkinitramfs.sh" "$manifest" "$out/initramfs.cpio" 2>"$out/mkinitramfs.log"; then
	bail_setup "build the initramfs (mkinitramfs.sh)" "$out/mkinitramfs.log"
fi
t_prep=$(date +%s)
diag "kernel $E2E_KREL, initramfs $(($(stat -c %s "$out/initramfs.cpio") / 1048576)) MiB," \
	"prepared in $((t_prep - t_start)) s"
for p in usbgwd usbgw e2e-json e2e-bulk usbip-tc usbgw-agent; do
	[ -x "$build/$p" ] || diag "$build/$p not built: scenarios that need it skip"
done

# 3. boot.  Serial ports: ttyS0 console, ttyS1 results, ttyS2 logs.
# The audio device's serial KEEP keeps it away from the agent of 61-69.
audio=()
[ "${E2E_AUDIO:-1}" = 1 ] && audio=(-device qemu-xhci,id=xhci
	-device usb-audio,bus=xhci.0,audiodev=a0,serial=KEEP
	-audiodev "wav,id=a0,path=$out/audio.wav,out.frequency=48000")
boot() {	# boot KERNEL: qemu's exit status, 125 if the guest never started
	local pid t0
	rm -f "$out"/console.log "$out"/results.log "$out"/logs.log
	timeout --kill-after=10 "$timeout_s" "$qemu" \
		-M pc -accel tcg,thread=multi -cpu max -smp 2 -m 512 \
		-nographic -nodefaults -nic none -no-reboot -monitor none \
		-serial "file:$out/console.log" -serial "file:$out/results.log" \
		-serial "file:$out/logs.log" "${audio[@]}" \
		-kernel "$1" -initrd "$out/initramfs.cpio" \
		-append "console=ttyS0,115200 rdinit=/init panic=-1 loglevel=4 \
			i8042.noaux i8042.nokbd usbcore.autosuspend=-1" \
		</dev/null >"$out/qemu.log" 2>&1 &
	pid=$!
	t0=$(date +%s)
	# A kernel that cannot boot this way (no PVH note, say) often just hangs:
	# give it boot_timeout_s to start init.
	while kill -0 $pid 2>/dev/null; do
		grep -q '^E2E: start' "$out/results.log" 2>/dev/null && break
		if [ $(($(date +%s) - t0)) -ge "$boot_timeout_s" ]; then
			kill $pid
			wait $pid
			return 125
		fi
		sleep 0.5
	done
	wait $pid
}
kernel=$E2E_VMLINUX
[ "${E2E_KERNEL:-vmlinux}" = bzimage ] && kernel=$E2E_BZIMAGE
boot "$kernel"
qrc=$?
if ! grep -q '^E2E: start' "$out/results.log" 2>/dev/null && [ "$kernel" = "$E2E_VMLINUX" ]; then
	diag "no result from the guest booted from vmlinux (qemu exit $qrc); retrying with bzImage"
	kernel=$E2E_BZIMAGE
	boot "$kernel"
	qrc=$?
fi
t_end=$(date +%s)

# 4. results.
started=0
done_seen=0
while IFS= read -r line; do
	line=${line%$'\r'}
	case $line in
	"E2E: start")		started=1
				tap_ok "guest booted ($(basename "$kernel")) and started the scenarios" ;;
	"E2E: done")		done_seen=1 ;;
	"E2E: ok - "*)		tap_ok "${line#E2E: ok - }" ;;
	"E2E: not ok - "*)	tap_fail "${line#E2E: not ok - }" ;;
	"E2E: skip - "*)	l=${line#E2E: skip - }
				tap_skip "${l% # *}" "${l##* # }" ;;
	"E2E: diag "*)		diag "${line#E2E: diag }" ;;
	"E2E: metric "*)	l=${line#E2E: metric }
				diag "metric ${l% *} = ${l##* }"
				echo "${l##* }" > "$out/metric.${l% *}" ;;
	esac
done < <(cat "$out/results.log" 2>/dev/null)

if [ $started = 0 ]; then
	if [ $qrc = 125 ]; then
		tap_fail "guest booted and started the scenarios (no init within $boot_timeout_s s)"
	else
		tap_fail "guest booted and started the scenarios (qemu exit $qrc)"
	fi
fi
if [ $done_seen = 1 ]; then
	tap_ok "guest ran every scenario to the end"
elif [ $qrc = 124 ] || [ $qrc = 137 ]; then
	tap_fail "guest ran every scenario to the end (timed out after $timeout_s s)"
else
	tap_fail "guest ran every scenario to the end (qemu exit $qrc)"
fi

# The ratio: the gateway read against the mean of the direct reads taken before
# (10-direct-disk) and after (90-gw-stop) it.
if [ -f "$out/metric.direct_read_mbps" ] && [ -f "$out/metric.gateway_read_mbps" ]; then
	diag "$(cat "$out"/metric.direct_read_mbps "$out"/metric.direct_read2_mbps 2>/dev/null |
		awk -v g="$(cat "$out/metric.gateway_read_mbps")" '
		{ s += $1; n++; all = all (n > 1 ? " and " : "") $1 }
		END { d = s / n; printf "disk read throughput: direct %.2f MB/s (%s), through the gateway %.2f MB/s, ratio %.2f", d, all, g, (d > 0 ? g / d : 0) }')"
fi
# selected FILE: E2E_ONLY (file name prefixes) runs the scenario FILE.
selected() {
	local p
	[ -z "${E2E_ONLY:-}" ] && return 0
	for p in $E2E_ONLY; do
		case $1 in "$p"*) return 0 ;; esac
	done
	return 1
}
# ISO (72-agent-iso): the frames QEMU's usb-audio played that are not silence
# (the guest sends no zero sample), and of those the ones in the order sent:
# frame i is L = R = 1000 + i mod 2000, times the mixer's gain (estimated on
# the first 2000 frames), within 3.
if [ -f "$out/metric.iso_frames_sent" ] && [ -f "$out/audio.wav" ]; then
	sent=$(cat "$out/metric.iso_frames_sent")
	set -- $(perl -e 'open(F, "<", $ARGV[0]) or die; binmode F; read(F, $h, 44);
		while (read(F, $f, 4) == 4) { ($l, $r) = unpack("s<s<", $f);
			push(@v, $l == $r ? $l : -1) if $l || $r }
		($se, $sv, $m) = (0, 0, 0);
		for ($i = 0; $i < @v && $i < 2000; $i++) { $se += 1000 + $i % 2000; $sv += $v[$i] }
		$k = $se ? $sv / $se : 0;
		for ($i = 0; $i < @v; $i++) { $m++ if abs($v[$i] - $k * (1000 + $i % 2000)) <= 3 }
		printf "%d %d %.3f", scalar(@v), $m, $k' "$out/audio.wav")
	if [ "$2" -ge $((sent * 95 / 100)) ] && [ "$1" -le "$sent" ]; then
		tap_ok "ISO: QEMU's usb-audio played $1 of the $sent frames sent through the agent, $2 in order (gain $3)"
	else
		tap_fail "ISO: QEMU's usb-audio played $1 of the $sent frames sent through the agent, $2 in order (gain $3; 95-100 % expected)"
	fi
elif [ "${E2E_AUDIO:-1}" = 1 ] && [ -x "$build/usbgw-agent" ] && selected 72-agent-iso.sh; then
	tap_fail "ISO: no frames were sent through the agent to QEMU's usb-audio (see 72-agent-iso)"
fi
diag "wall time $((t_end - t_start)) s (preparation $((t_prep - t_start)) s, qemu $((t_end - t_prep)) s);" \
	"logs in $out"

if [ $failed -gt 0 ] || [ "${E2E_VERBOSE:-0}" = 1 ]; then
	{
		echo "---- guest console (ttyS0) ----"
		tr -d '\r' < "$out/console.log" 2>/dev/null | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g'
		echo "---- guest logs: usbgwd, usbipd/syslog, dmesg (ttyS2) ----"
		tr -d '\r' < "$out/logs.log" 2>/dev/null
		echo "---- qemu ----"
		cat "$out/qemu.log" 2>/dev/null
	} | ediag
fi
echo "1..$n"
[ $failed -eq 0 ]
