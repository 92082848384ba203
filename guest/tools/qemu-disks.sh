#!/bin/sh
# Boot the test kernel under QEMU (qboot) with legacy virtio-blk disks.
#   tools/qemu-disks.sh "test=blk-read blk.qd=4" IMG[,ro][,serial=ID] ...
# Images come from tools/mkpattern.py. Bounded by a 120 s timeout.
set -u
cmdline=$1
shift
here=$(dirname "$0")
args=""
i=0
for d in "$@"; do
	path=${d%%,*}
	opts=""
	ro=""
	case "$d" in *,ro*) ro=",readonly=on" ;; esac
	case "$d" in *serial=*) opts=",serial=${d##*serial=}"; opts=${opts%%,ro} ;; esac
	args="$args -drive file=$path,if=none,id=d$i,format=raw$ro -device virtio-blk-pci,drive=d$i,disable-modern=on$opts"
	i=$((i + 1))
done
# shellcheck disable=SC2086
exec timeout 120 qemu-system-x86_64 -accel kvm -cpu host,-arch-capabilities \
	-m 256M -nographic -nodefaults -no-reboot \
	-bios /usr/share/qemu/qboot.rom -serial stdio -display none \
	-device isa-debug-exit,iobase=0x501,iosize=2 \
	-kernel "$here/../build/bzImage" -append "$cmdline" $args
