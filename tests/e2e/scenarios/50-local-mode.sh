# Local mode (issue 7): the gateway attaches approved devices to this host's
# vhci_hcd itself, direct and inspected, with authorized_default=0.  usbgwd has
# the back end (attach_local.c) but no configuration for it yet, so these are
# reported as skipped until the daemon exposes it (tests/e2e/README.md).

for n in "local: approved disk attached by the gateway, data verified (direct)" \
    "local: approved disk attached by the gateway, data verified (inspected)" \
    "local: revoke detaches the vhci port" \
    "local: with authorized_default=0 no driver binds until authorized" \
    "throughput: local direct vs inspected"; do
	skip "$n" "local mode not configurable in usbgwd yet (issue 7)"
done
