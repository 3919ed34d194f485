#!/bin/bash
# Download and unpack what the qemu end-to-end test needs into tests/e2e/cache/:
# Debian's kernel (the one linux-image-amd64 depends on), busybox-static, usbip with
# its library closure, usb.ids, udev (systemd-udevd and its rules, for the agent
# scenarios: Debian's libusb learns hot-plug from the udev monitor; its libraries
# are the host's, as a Debian 12 host with systemd has them all) and, when the host
# has no depmod, kmod.  Also the kernel's headers, kbuild and source package, to
# build dummy_hcd with isochronous transfers (dummy_hcd-iso.patch; the stock
# driver fails every ISO URB): the build replaces the guest's dummy_hcd.ko.
# Nothing is installed system-wide.  A warm cache is used as it is, without asking apt; set
# E2E_REFRESH=1 to resolve the package versions again.
#
# On success the last line of output is the path of cache/manifest, which names the
# kernel release and the unpacked paths (sourced by run.t).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${E2E_CACHE:-$here/cache}
debs=$cache/debs
root=$cache/root
manifest=$cache/manifest

# Libraries every Debian 12 host that builds usbgw already has; the guest gets the
# host's copies (through ldd) so that the project's binaries and the stock tools
# share one libc.
host_provided="libc6 libgcc-s1 gcc-12-base libssl3"

msg() { echo "fetch: $*" >&2; }
die() { echo "fetch: error: $*" >&2; exit 1; }

patch_sum() { sha256sum "$here/dummy_hcd-iso.patch" | cut -c1-16; }

manifest_ok() {
	[ -f "$manifest" ] || return 1
	# shellcheck disable=SC1090
	( . "$manifest" &&
	  [ -f "$E2E_VMLINUX" ] && [ -f "$E2E_BZIMAGE" ] && [ -d "$E2E_MODDIR" ] &&
	  [ -x "$E2E_BUSYBOX" ] && [ -x "$E2E_USBIP" ] && [ -x "$E2E_USBIPD" ] &&
	  [ -f "$E2E_USBIDS" ] && [ -x "$E2E_DEPMOD" ] && [ -x "$E2E_UDEVADM" ] &&
	  [ -d "$E2E_UDEVLIB/rules.d" ] && [ -f "$E2E_DUMMY_ISO" ] &&
	  [ "$E2E_DUMMY_ISO_PATCH" = "$(patch_sum)" ] ) 2>/dev/null
}

if [ "${E2E_REFRESH:-0}" != 1 ] && manifest_ok; then
	echo "$manifest"
	exit 0
fi

for t in apt-get apt-cache dpkg-deb; do
	command -v "$t" >/dev/null || die "$t not found (a Debian host is needed)"
done
mkdir -p "$debs" "$root"

# resolve: set kpkg (the kernel package linux-image-amd64 points at, e.g.
# linux-image-6.1.0-57-amd64), krel and pkgs (what to download: the kernel,
# busybox-static, usbip and every library it needs less what the host provides,
# and kmod when the host has no depmod).
kernel_pkg() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
resolve() {
	local p usbip_pkgs
	kpkg=$(kernel_pkg)
	if [ -z "$kpkg" ]; then
		msg "apt does not know linux-image-amd64; running apt-get update"
		apt-get update -qq >&2 || die "apt-get update failed"
		kpkg=$(kernel_pkg)
		[ -n "$kpkg" ] || die "cannot resolve linux-image-amd64"
	fi
	krel=${kpkg#linux-image-}
	usbip_pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances usbip 2>/dev/null |
		grep -v '^ ' | grep -v '^<' | sort -u)
	[ -n "$usbip_pkgs" ] || die "cannot resolve usbip's dependencies"
	pkgs="$kpkg busybox-static udev"
	# dummy_hcd with ISO: headers (and what they depend on: the -common
	# headers, kbuild) and the source of dummy_hcd.c (linux-source-X.Y).
	hpkg=linux-headers-$krel
	pkgs="$pkgs $hpkg $(apt-cache depends "$hpkg" 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-(headers|kbuild)-/ { print $2 }')"
	spkg=linux-source-$(echo "$krel" | cut -d. -f1-2)
	pkgs="$pkgs $spkg"
	for p in $usbip_pkgs; do
		case " $host_provided " in *" $p "*) continue ;; esac
		pkgs="$pkgs $p"
	done
	command -v depmod >/dev/null || [ -x /sbin/depmod ] || pkgs="$pkgs kmod"
}

# Download each package unless a .deb of its candidate version is already here.
download() {
	local p=$1 v f
	v=$(apt-cache policy "$p" 2>/dev/null | awk '$1 == "Candidate:" { print $2; exit }')
	[ -n "$v" ] && [ "$v" != "(none)" ] || die "no candidate version for $p"
	f=$(ls "$debs/${p}_${v/:/%3a}_"*.deb 2>/dev/null | head -n 1 || true)
	if [ -z "$f" ]; then
		msg "downloading $p $v"
		if ! ( cd "$debs" && apt-get download -q "$p=$v" >/dev/null 2>"$debs/.err" ); then
			# Stale package lists name a version the mirror no longer has.
			cat "$debs/.err" >&2
			[ "$updated" = 0 ] || die "apt-get download $p=$v failed"
			msg "apt-get download failed; running apt-get update and resolving again"
			apt-get update -qq >&2 || die "apt-get update failed"
			updated=1
			return 1
		fi
		f=$(ls "$debs/${p}_${v/:/%3a}_"*.deb | head -n 1)
	fi
	if [ ! -e "$f.unpacked" ]; then
		msg "unpacking $(basename "$f")"
		dpkg-deb -x "$f" "$root" || die "dpkg-deb -x $f failed"
		touch "$f.unpacked"
	fi
}
updated=0
resolve
for p in $pkgs; do
	download "$p" && continue
	resolve			# after apt-get update; then start over
	for q in $pkgs; do
		download "$q"
	done
	break
done

moddir=$root/lib/modules/$krel
[ -d "$moddir" ] || die "kernel modules for $krel not found in $kpkg"
bz=$root/boot/vmlinuz-$krel
[ -f "$bz" ] || die "$bz not found in $kpkg"
vmlinux=$cache/vmlinux-$krel
if [ ! -s "$vmlinux" ]; then
	msg "extracting vmlinux from vmlinuz-$krel"
	"$here/extract-vmlinux.sh" "$bz" > "$vmlinux.tmp" || die "cannot extract vmlinux"
	mv "$vmlinux.tmp" "$vmlinux"
fi

# usb.ids: the package ships the real file under /var/lib/usbutils and a symlink in
# /usr/share/misc; resolve the link inside the unpacked tree.
usbids=$root/var/lib/usbutils/usb.ids
[ -f "$usbids" ] || usbids=$(find "$root" -name usb.ids -type f | head -n 1)
[ -f "$usbids" ] || die "usb.ids not found"

# dummy_hcd.ko with ISO, built out of tree against the guest kernel's headers
# from the source package's dummy_hcd.c and dummy_hcd-iso.patch.  The headers'
# Makefile includes the -common tree by its absolute /usr/src path: pointed at
# the unpacked copy here instead.
psum=$(patch_sum)
isodir=$cache/dummy_hcd-iso-$psum
dummy_iso=$isodir/dummy_hcd.ko
if [ ! -s "$dummy_iso" ]; then
	for t in patch make gcc-12; do
		command -v $t >/dev/null || die "$t not found (tests/deps.sh installs it)"
	done
	hdir=$root/usr/src/linux-headers-$krel
	[ -f "$hdir/Makefile" ] || die "$hdir/Makefile not found in $hpkg"
	star=$(ls "$root"/usr/src/linux-source-*.tar.* 2>/dev/null | head -n 1)
	[ -n "$star" ] || die "no linux-source tarball in $spkg"
	msg "building dummy_hcd.ko with ISO ($(basename "$star"), $krel)"
	sed -i "s|^include /usr/src/|include $root/usr/src/|" "$hdir/Makefile"
	rm -rf "$isodir.tmp" && mkdir -p "$isodir.tmp/src"
	src=$(basename "$star"); src=${src%.tar.*}
	tar -xaf "$star" -C "$isodir.tmp/src" "$src/drivers/usb/gadget/udc/dummy_hcd.c" ||
		die "dummy_hcd.c not found in $star"
	( cd "$isodir.tmp/src/$src" && patch -p1 --no-backup-if-mismatch -s \
		< "$here/dummy_hcd-iso.patch" ) || die "dummy_hcd-iso.patch does not apply to $src"
	cp "$isodir.tmp/src/$src/drivers/usb/gadget/udc/dummy_hcd.c" "$isodir.tmp/"
	rm -rf "$isodir.tmp/src"
	echo 'obj-m := dummy_hcd.o' > "$isodir.tmp/Kbuild"
	make -s -C "$hdir" M="$isodir.tmp" modules >&2 ||
		die "building dummy_hcd.ko against $hdir failed"
	[ -s "$isodir.tmp/dummy_hcd.ko" ] || die "no dummy_hcd.ko after the build"
	for d in "$cache"/dummy_hcd-iso-*; do	# builds of older patches
		[ "$d" = "$isodir.tmp" ] || rm -rf "$d"
	done
	mv "$isodir.tmp" "$isodir"
fi

depmod=$(command -v depmod || true)
[ -n "$depmod" ] || { [ -x /sbin/depmod ] && depmod=/sbin/depmod; } || true
if [ -z "$depmod" ]; then
	# kmod is one program that acts by the name it is called under.
	mkdir -p "$cache/bin"
	ln -sf "$root/bin/kmod" "$cache/bin/depmod"
	depmod=$cache/bin/depmod
fi

cat > "$manifest.tmp" <<EOT
E2E_KREL='$krel'
E2E_VMLINUX='$vmlinux'
E2E_BZIMAGE='$bz'
E2E_MODDIR='$moddir'
E2E_BUSYBOX='$root/bin/busybox'
E2E_USBIP='$root/usr/sbin/usbip'
E2E_USBIPD='$root/usr/sbin/usbipd'
E2E_USBIDS='$usbids'
E2E_DEPMOD='$depmod'
E2E_UDEVADM='$root/bin/udevadm'
E2E_UDEVLIB='$root/lib/udev'
E2E_DUMMY_ISO='$dummy_iso'
E2E_DUMMY_ISO_PATCH='$psum'
E2E_LIBPATH='$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu'
EOT
mv "$manifest.tmp" "$manifest"
manifest_ok || die "cache incomplete after download: see $manifest"
echo "$manifest"
