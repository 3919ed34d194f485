#!/bin/bash
# extract-vmlinux.sh BZIMAGE > vmlinux
# Write the ELF kernel inside an x86 bzImage to stdout.  The boot protocol's setup
# header says where the compressed payload is (payload_offset/payload_length, boot
# protocol >= 2.08); its first bytes say which compressor made it.  Booting the ELF
# directly (qemu -kernel vmlinux, PVH entry) skips the in-guest decompression, which
# costs several seconds under TCG.
set -eu

img=${1:?usage: extract-vmlinux.sh BZIMAGE}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

u8()  { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }
u32() { od -An -tu4 -j "$2" -N4 --endian=little "$1" | tr -d ' '; }

[ "$(dd if="$img" bs=1 skip=$((0x202)) count=4 2>/dev/null)" = HdrS ] || {
	echo "extract-vmlinux: $img is not a bzImage" >&2; exit 1; }
setup_sects=$(u8 "$img" $((0x1f1)))
[ "$setup_sects" -ne 0 ] || setup_sects=4
poff=$(u32 "$img" $((0x248)))
plen=$(u32 "$img" $((0x24c)))
start=$(( (setup_sects + 1) * 512 + poff ))

payload() { tail -c +$((start + 1)) "$img" | head -c "$plen"; }
magic=$(od -An -tx1 -j "$start" -N6 "$img" | tr -d " \n")
case $magic in
fd377a585a00*)	dec="xz -dc --single-stream" ;;
1f8b*)		dec="gzip -dc" ;;
28b52ffd*)	dec="zstd -dcq" ;;
425a68*)	dec="bzip2 -dc" ;;
5d0000*)	dec="xz -dc --format=lzma" ;;
02214c18*)	dec="lz4 -dc" ;;
*)		echo "extract-vmlinux: unknown payload magic $magic" >&2; exit 1 ;;
esac
# The build appends the decompressed size after the stream, so decompressors may
# complain about trailing bytes: judge by the result, not by their status.
payload | $dec > "$tmp" 2>/dev/null || true
[ "$(head -c 4 "$tmp" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || {
	echo "extract-vmlinux: payload ($dec) did not decompress to an ELF file" >&2
	exit 1; }
cat "$tmp"
