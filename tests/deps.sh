#!/bin/sh
# Install what usbgw needs to build, run and test, with apt-get.
# Safe to run twice; needs root (or sudo).  Used by `make deps` and CI.
set -eu

PKGS="make gcc clang libclang-rt-14-dev pkg-config perl strace systemd
libevent-dev libsqlite3-dev libusb-1.0-0-dev libssl-dev libjansson-dev
sqlite3 socat python3 tshark usbip iproute2 util-linux passwd procps psmisc
qemu-system-x86 cpio xz-utils zstd nftables patch prometheus curl stunnel4
dpkg-dev debhelper fakeroot lintian adduser
postgresql libpq-dev"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "deps: everything is installed"
	exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
