#!/bin/sh
# deps.sh — install the Debian packages govm's build, tests and default guest
# need, if any is missing. `make run` and `make test` call it, so on a fresh
# Debian machine those two commands are all the set-up there is.
#
# Fast path: when everything is installed it only asks dpkg and exits.
# Not root: prints the apt-get command to run and exits non-zero.
set -eu

# linux-source-6.1 and the kernel's build tools (flex bison bc libelf-dev patch perl) build
# the default guest's kernel (scripts/linux.sh); linux-image-amd64 is the stock
# kernel the L2 test boots; kmod's modprobe loads fuse for the failing-disk tests.
PKGS="gcc make libc6-dev qemu-system-x86 linux-image-amd64 busybox-static cpio
e2fsprogs iproute2 iputils-ping fio iperf3 ethtool xz-utils bzip2 zstd lz4
linux-source-6.1 flex bison bc libelf-dev patch perl kmod"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps: not root: run  sudo apt-get install -y$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
