# Gateway shutdown: SIGTERM stops usbgwd and gives its claims back to the
# exporter; the disk is then read straight from usbipd once more, so the
# throughput ratio compares the gateway with direct reads taken before and after
# it (TCG speed drifts with the host's load).

disk=$(dummy_busid 0)
# 68 stops usbipd for the agent's half and starts it again, holds it
# (SIGSTOP) during its own half's timing, and pins threads to one vCPU; a 68
# cut short by its time limit must not fail this one.
bench_leftovers >/dev/null 2>&1
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "stop: usbgwd exits on SIGTERM" \
		"stop: no sanitizer report in the gateway log" \
		"stop: usbipd lists the disk again once the gateway has let go" \
		"stop: direct attach after the gateway works, checksum matches" \
		"throughput: second direct read timed"
	return 0
fi

pid=$(cat "$E2E_STATE/usbgwd.pid" 2>/dev/null)
[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
check "stop: usbgwd exits on SIGTERM within 10 s" wait_gone 10 proc_alive "$pid"
# Meaningful with a SANITIZE=1 build (USBGW_BUILD=build-asan); harmless otherwise.
check "stop: no sanitizer report in the gateway log" \
	fails grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$GW_LOG"
check "stop: usbipd lists the disk $disk again once the gateway has let go" \
	wait_for 20 usbipd_lists "$disk"
ok=0
if usbip_attach "$USBIPD_PORT" "$disk" && wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	[ "$(disk_sha "$d")" = "$(file_sha "$DISK_IMG")" ] && ok=1
	mbps=$(disk_read_mbps "$d")
fi
check "stop: direct attach after the gateway works, checksum matches" [ $ok = 1 ]
check "throughput: second direct read timed (${mbps:-?} MB/s)" [ -n "$mbps" ]
[ -z "$mbps" ] || e2e_metric direct_read2_mbps "$mbps"
vhci_detach_all
wait_gone 10 vhci_any_used
