#!/bin/bash
# mkinitramfs.sh MANIFEST OUTPUT.cpio
# Build the guest's uncompressed initramfs from two newc archives put end to end
# (the kernel unpacks concatenated archives):
#   base  - busybox, the kernel modules the scenarios need (with depmod output),
#           modprobe.d, Debian's usbip/usbipd with their libraries, usb.ids, the
#           gadget's backing disk image, Debian's udev (systemd-udevd, udevadm,
#           its rules) and the agent's user and group.  Cached in the cache
#           folder, keyed by what goes into it.
#   run   - /init, the guest library, the scenarios, the agent's udev rule and the
#           project's freshly built programs from $USBGW_BUILD with the libraries
#           ldd lists.  Made every run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
manifest=${1:?usage: mkinitramfs.sh MANIFEST OUTPUT}
out=${2:?usage: mkinitramfs.sh MANIFEST OUTPUT}
# shellcheck disable=SC1090
. "$manifest"
cache=$(dirname "$manifest")
build=${USBGW_BUILD:-}
disk_mb=${E2E_DISK_MB:-8}

die() { echo "mkinitramfs: error: $*" >&2; exit 1; }

# Modules the scenarios load, by module name; their dependencies come from
# modules.dep.  crct10dif_generic and crc64_rocksoft_generic are sd_mod's soft
# dependencies (the crypto back ends of crc-t10dif and crc64-rocksoft).  The
# agent scenarios (60-69) add the HID and ACM gadget functions and their host
# drivers (hidraw is built into hid).
modules="configfs usb_common usbcore udc_core dummy_hcd libcomposite
	usb_f_mass_storage usb_f_ss_lb scsi_mod usb_storage sd_mod
	crct10dif_generic crc64_rocksoft_generic usbip_core usbip_host vhci_hcd
	usb_f_hid usb_f_acm hid usbhid hid_generic cdc_acm"
# 74-gw-iface watches what usbip-host submits with usbmon.
modules="$modules usbmon"

# Programs from the build folder, with where they go in the guest.
project_progs="usbgwd:/usr/sbin usbgw:/usr/bin usbgw-sim:/usr/bin usbip-tc:/usr/bin
	e2e-json:/usr/bin e2e-bulk:/usr/bin usbgw-agent:/usr/sbin usbgw-attach:/usr/sbin
	tlsid-issue:/usr/bin"
# The agent's request and ISO scenarios (71-agent-requests, 72-agent-iso):
# usbfs-torture, the ECM gadget function (a data interface with alternate
# settings 0 and 1), xhci for QEMU's usb-audio (run.t's E2E_AUDIO=1).
project_progs="$project_progs usbfs-torture:/usr/bin"
modules="$modules usb_f_ecm xhci_pci"
# The UAC2 capture scenario (73-agent-uac2): the audio gadget function, on the
# dummy_hcd.ko built with ISO by fetch.sh (it replaces the stock module).
modules="$modules usb_f_uac2"

mkcpio() {	# mkcpio DIR OUT
	if command -v cpio >/dev/null; then
		(cd "$1" && find . -mindepth 1 | LC_ALL=C sort |
			cpio -o -H newc -R 0:0 --quiet) > "$2"
	else
		(cd "$1" && find . -mindepth 1 | LC_ALL=C sort |
			"$E2E_BUSYBOX" cpio -o -H newc 2>/dev/null) > "$2"
	fi
}

# copy_libs DESTROOT PROGRAM...: the shared libraries ldd resolves for each program
# (cached Debian libraries first, then the host's), under their sonames in
# /lib/x86_64-linux-gnu, and the dynamic loader at its absolute path.
copy_libs() {
	local dest=$1 p line so path
	shift
	mkdir -p "$dest/lib/x86_64-linux-gnu" "$dest/lib64"
	for p in "$@"; do
		ldd "$p" >/dev/null 2>&1 || continue	# static: nothing to copy
		while read -r line; do
			case $line in
			*"not found"*)
				die "$p: ${line%% *} not found by ldd" ;;
			*"=> /"*)
				so=${line%% =>*}
				path=${line#*=> }
				path=${path%% (*}
				cp -L "$path" "$dest/lib/x86_64-linux-gnu/$so" ;;
			/*)
				path=${line%% (*}
				mkdir -p "$dest$(dirname "$path")"
				cp -L "$path" "$dest$path" ;;
			esac
		done < <(LD_LIBRARY_PATH=$E2E_LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$p")
	done
}

# A deterministic disk image: every 512-byte sector starts with its number in ASCII
# and continues with SHA-256 output seeded by that number, so a misplaced, stale or
# zeroed sector changes the checksum.
make_disk() {	# make_disk FILE MIB
	perl -e '
		use strict; use Digest::SHA qw(sha256);
		my ($file, $mb) = @ARGV;
		open(my $fh, ">:raw", $file) or die "$file: $!";
		for my $lba (0 .. $mb * 2048 - 1) {
			my $s = sprintf("usbgw-e2e lba %010d\n", $lba);
			$s .= sha256("$lba/$_") for 0 .. 15;
			# Keep the MBR signature out of sector 0: no partition table.
			substr($s, 510, 2) = "\0\0" if $lba == 0;
			print $fh substr($s, 0, 512);
		}
		close($fh) or die "$file: $!";
	' "$1" "$2"
}

build_base() {	# build_base DIR
	local d=$1 a m f mods=""
	mkdir -p "$d"/{bin,dev,proc,sys,tmp,run,etc/modprobe.d,usr/bin,usr/sbin,usr/share/misc,e2e}
	ln -s bin "$d/sbin"
	mkdir -p "$d/var"
	ln -s ../run "$d/var/run"	# usbip attach records ports in /var/run/vhci_hcd
	cp "$E2E_BUSYBOX" "$d/bin/busybox"
	for a in $("$E2E_BUSYBOX" --list); do
		[ "$a" = busybox ] || ln -sf busybox "$d/bin/$a"
	done

	# Kernel modules: the closure of $modules over the full tree's modules.dep.
	local kdir=$E2E_MODDIR
	[ -f "$kdir/modules.dep" ] || "$E2E_DEPMOD" -b "${kdir%/lib/modules/*}" "$E2E_KREL"
	for m in $modules; do
		f=$(awk -v m="$m" -F: '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*$/, "", n);
			gsub(/-/, "_", n); if (n == m) { print; exit } }' "$kdir/modules.dep")
		[ -n "$f" ] || die "module $m not in $kdir/modules.dep"
		mods="$mods ${f%%:*} ${f#*:}"
	done
	for f in $(echo "$mods" | tr ' ' '\n' | sort -u); do
		mkdir -p "$d/lib/modules/$E2E_KREL/$(dirname "$f")"
		case $f in
		*.ko.xz)  xz -dc "$kdir/$f" > "$d/lib/modules/$E2E_KREL/${f%.xz}" ;;
		*.ko.zst) zstd -dcq "$kdir/$f" > "$d/lib/modules/$E2E_KREL/${f%.zst}" ;;
		*)        cp "$kdir/$f" "$d/lib/modules/$E2E_KREL/$f" ;;
		esac
	done
	f=$(find "$d/lib/modules/$E2E_KREL" -name dummy_hcd.ko | head -n 1)
	[ -n "$f" ] || die "dummy_hcd.ko not among the guest's modules"
	cp "$E2E_DUMMY_ISO" "$f"
	cp "$kdir"/modules.order "$kdir"/modules.builtin* "$d/lib/modules/$E2E_KREL/"
	"$E2E_DEPMOD" -b "$d" "$E2E_KREL" || die "depmod failed"
	cat > "$d/etc/modprobe.d/e2e.conf" <<-'EOT'
	# No 1 s settle delay before scanning a new USB disk.
	options usb-storage delay_use=0
	# Gadget controllers: .0-.2 for usbipd (the disk, the loopback device, a
	# second disk), .3-.6 for the agent (disk, keyboard, ACM, loopback "KEEP").
	options dummy_hcd num=8
	EOT

	cp "$E2E_USBIP" "$E2E_USBIPD" "$d/usr/sbin/"
	copy_libs "$d" "$E2E_USBIP" "$E2E_USBIPD"
	cp -L "$E2E_USBIDS" "$d/usr/share/misc/usb.ids"

	make_disk "$d/e2e/disk.img" "$disk_mb"
	(cd "$d/e2e" && sha256sum disk.img | cut -d' ' -f1 > disk.sha256)

	# Debian's udev: udevadm is also systemd-udevd (by the name it runs under);
	# its rules and helpers; no hwdb.bin (the hwdb builtin finds nothing).
	cp "$E2E_UDEVADM" "$d/usr/bin/udevadm"
	mkdir -p "$d/lib/systemd" "$d/etc/udev/rules.d"
	ln -s /usr/bin/udevadm "$d/lib/systemd/systemd-udevd"
	cp -a "$E2E_UDEVLIB" "$d/lib/udev"
	rm -rf "$d/lib/udev/hwdb.d"
	copy_libs "$d" "$E2E_UDEVADM"
	# The agent's unprivileged user (scenarios 60-69) and its group, which the
	# udev rule gives the USB device nodes.
	cat > "$d/etc/passwd" <<-'EOT'
	root:x:0:0:root:/root:/bin/sh
	usbgw-agent:x:990:990:usbgw-agent:/nonexistent:/bin/false
	EOT
	cat > "$d/etc/group" <<-'EOT'
	root:x:0:
	usbgw-agent:x:990:
	EOT
}

build_run() {	# build_run DIR
	local d=$1 ent name dir progs=()
	mkdir -p "$d/e2e/scenarios" "$d/usr/bin" "$d/usr/sbin"
	cp "$here/guest/init" "$d/init"
	chmod 755 "$d/init"
	cp "$here/guest/lib.sh" "$d/e2e/lib.sh"
	cp "$here"/guest/*.conf "$d/e2e/" 2>/dev/null || true
	# The agent's udev rule, as make install installs it.
	mkdir -p "$d/etc/udev/rules.d"
	cp "$top/contrib/70-usbgw-agent.rules" "$d/etc/udev/rules.d/" ||
		die "contrib/70-usbgw-agent.rules missing"
	if [ -n "${E2E_ONLY:-}" ]; then
		for name in $E2E_ONLY; do
			cp "$here/scenarios/$name"*.sh "$d/e2e/scenarios/" ||
				die "no scenario matches $name"
		done
	else
		cp "$here"/scenarios/*.sh "$d/e2e/scenarios/"
	fi
	: > "$d/e2e/programs"
	if [ -n "$build" ]; then
		for ent in $project_progs; do
			name=${ent%%:*}
			dir=${ent#*:}
			[ -x "$build/$name" ] || continue
			cp "$build/$name" "$d$dir/"
			progs+=("$build/$name")
			echo "$name" >> "$d/e2e/programs"
		done
	fi
	# E2E_STRACE=1: the host's strace, for 68's syscall counts.
	if [ "${E2E_STRACE:-0}" = 1 ] && s=$(command -v strace); then
		cp "$s" "$d/usr/bin/strace"
		progs+=("$s")
	fi
	# E2E_PERF=1: the host's perf, for 68's profiles.
	if [ "${E2E_PERF:-0}" = 1 ] && s=$(command -v perf); then
		cp "$s" "$d/usr/bin/perf"
		progs+=("$s")
	fi
	[ ${#progs[@]} -eq 0 ] || copy_libs "$d" "${progs[@]}"
	{
		echo "E2E_KREL='$E2E_KREL'"
		echo "E2E_DISK_MB='$disk_mb'"
		echo "E2E_BREAK='${E2E_BREAK:-}'"
		echo "E2E_TRACE='${E2E_TRACE:-0}'"
		echo "E2E_BENCH_READS='${E2E_BENCH_READS:-5}'"
		echo "E2E_SCENARIO_TIMEOUT='${E2E_SCENARIO_TIMEOUT:-300}'"
	} > "$d/e2e/env"
}

# The base archive is keyed by everything that goes into it.
key=$( { cat "$manifest" "$0"; echo "$disk_mb"; } | sha256sum | cut -c1-16)
base=$cache/base-$key.cpio
if [ ! -s "$base" ]; then
	rm -f "$cache"/base-*.cpio
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "mkinitramfs: building base archive (modules, busybox, usbip, disk)" >&2
	build_base "$tmp/base"
	mkcpio "$tmp/base" "$base.tmp"
	mv "$base.tmp" "$base"
	rm -rf "$tmp"
	trap - EXIT
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build_run "$tmp/run"
mkcpio "$tmp/run" "$tmp/run.cpio"
cat "$base" "$tmp/run.cpio" > "$out"
