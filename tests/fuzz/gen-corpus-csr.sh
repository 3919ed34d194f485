#!/bin/sh
# Write the seed corpus of fuzz_csr (certificate requests).
#
#     tests/fuzz/gen-corpus-csr.sh [tests/fuzz/corpus/csr]
#
# Input format: see the comment at the top of tests/fuzz/fuzz_csr.c (one
# flags byte, then the CSR: PEM, or DER with bit 0 set).  Made with the
# openssl command, independently of gateway/tls/tlsid.c; keys are fresh each
# run (they sign nothing but these requests).  Files named regress-* are
# left alone.
set -eu
out=${1:-tests/fuzz/corpus/csr}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -f "$out"/seed-*

openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/p256.key" 2>/dev/null
openssl genrsa -out "$tmp/rsa2048.key" 2048 2>/dev/null
openssl genrsa -out "$tmp/rsa1024.key" 1024 2>/dev/null
openssl ecparam -name secp384r1 -genkey -noout -out "$tmp/p384.key" 2>/dev/null

i=0
seed() {	# flags-byte file
	printf "\\$(printf '%03o' "$1")" >"$out/seed-$(printf '%03d' $i)"
	cat "$2" >>"$out/seed-$(printf '%03d' $i)"
	i=$((i + 1))
}
req() {		# key subject name
	openssl req -new -key "$tmp/$1.key" -subj "$2" -sha256 \
	    -out "$tmp/$3.pem" 2>/dev/null
	openssl req -in "$tmp/$3.pem" -outform DER -out "$tmp/$3.der"
}
req p256 "/O=usbgw/OU=agent/CN=tc17" agent
req p256 "/O=usbgw/OU=host/CN=vdi01" host
req rsa2048 "/CN=rsa-2048" rsa
req rsa1024 "/CN=weak" weak
req p384 "/CN=p384" p384
req p256 "/CN=bad!name" badname
req p256 "/CN=a/CN=b" twocn

seed 0 "$tmp/agent.pem"		# PEM, name given, agent
seed 2 "$tmp/agent.pem"		# PEM, name from the CSR
seed 6 "$tmp/host.pem"		# PEM, name from the CSR, host
seed 1 "$tmp/agent.der"		# DER
seed 3 "$tmp/host.der"
seed 3 "$tmp/rsa.der"
seed 3 "$tmp/weak.der"
seed 3 "$tmp/p384.der"
seed 3 "$tmp/badname.der"
seed 3 "$tmp/twocn.der"
echo "wrote $i seeds to $out"
