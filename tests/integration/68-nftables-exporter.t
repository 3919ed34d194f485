#!/bin/bash
# contrib/nftables-exporter.nft (issue 12, item 12): its syntax passes
# `nft -c`, and, loaded in a private network namespace (the host's
# rules are never touched) with the gateway's address set to 127.0.0.1,
# it lets the gateway's address import from an exporter on port PORT
# and drops (and counts) a connection from any other address.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

need_prog nft unshare socat python3 "$SIM"
[ "$(id -u)" = 0 ] || skip_all "needs root (network namespaces)"
unshare -n true 2>/dev/null || skip_all "unshare -n not permitted here"
plan 6

NFT=$(cd "$(dirname "$0")/../.." && pwd)/contrib/nftables-exporter.nft
run unshare -n nft -c -f "$NFT"
is "$RC" 0 "nft -c accepts the ruleset as shipped${ERR:+: $ERR}"

# the inner script: runs in its own network namespace, prints key=value
cat >"$T/inner.sh" <<EOF2
set -u
ip link set lo up
ip addr add 127.0.0.2/8 dev lo 2>/dev/null
"$SIM" -l 127.0.0.1:3240 -p "$T/sim.port" -c /dev/null >"$T/sim.log" 2>&1 &
sim=\$!
for i in \$(seq 50); do [ -s "$T/sim.port" ] && break; sleep 0.1; done
sed -e 's/^define USBGW_GATEWAYS_V4 = .*/define USBGW_GATEWAYS_V4 = { 127.0.0.1 }/' \
    -e 's/^define USBGW_GATEWAYS_V6 = .*/define USBGW_GATEWAYS_V6 = { ::1 }/' \
    "$NFT" >"$T/rules.nft"
nft -f "$T/rules.nft"; echo load=\$?
# OP_REQ_DEVLIST from each source address: a reply header, or nothing
req='\\x01\\x11\\x80\\x05\\x00\\x00\\x00\\x00'
for src in 127.0.0.1 127.0.0.2; do
	n=\$(printf "\$req" | timeout 5 socat -t 2 - \\
	    TCP:127.0.0.1:3240,bind=\$src,connect-timeout=2 2>/dev/null | wc -c)
	echo "from_\$src=\$n"
done
nft list chain inet usbgw_exporter input | grep -o 'counter packets [0-9]*' | sed 's/ /=/g; s/counter=packets=/drops=/'
kill \$sim
EOF2
out=$(unshare -n bash "$T/inner.sh" 2>"$T/inner.err")
note "$out"
like "$out" 'load=0' "the ruleset loads (gateway 127.0.0.1)"
like "$out" 'from_127\.0\.0\.1=([1-9][0-9]*)' "the gateway's address gets the device list"
like "$out" 'from_127\.0\.0\.2=0' "another address gets nothing"
like "$out" 'drops=[1-9]' "... its packets dropped and counted"
is "$(nft list tables 2>/dev/null | grep -c usbgw_exporter)" 0 \
    "the host's own ruleset was never touched"
done_testing
