#!/bin/sh
# mkguest.sh OUTDIR — build the default Linux guest that `make run` boots.
#
# Output:
#   OUTDIR/bzImage        the installed Debian kernel (/boot/vmlinuz-<ver>), copied
#   OUTDIR/initrd.cpio.gz a busybox-static initramfs with the virtio (and ext4) modules
#
# Inputs come from Debian packages that must already be installed; this script never
# runs apt-get (it would need root and network, and `make` must stay side-effect free):
#   apt-get install linux-image-amd64 busybox-static cpio kmod
#
# Cached: if both outputs exist, were built for the same kernel version, and are newer
# than every input (kernel, modules.dep, busybox, this script), nothing is done.
#
# Environment:
#   KVER           kernel version to use (default: newest /boot/vmlinuz-* that has
#                  /lib/modules/<ver>/modules.dep)
#   SYSROOT        where to find boot/ and lib/modules/ (default: /); e.g. a directory
#                  made by `dpkg-deb -x linux-image-<ver>_amd64.deb DIR` + `depmod -b DIR`
#   GUEST_MODULES  space-separated module names to include (dependencies are added
#                  automatically from modules.dep; names absent for this kernel are
#                  skipped, so optional helpers like virtio_pci_legacy_dev are safe)
#
# Guest kernel command line parameters understood by /init:
#   govm.ip=ADDR/PREFIX   address for eth0 (e.g. govm.ip=10.0.2.15/24)
#   govm.gw=ADDR          default route via ADDR
#   govm.cmd=HEX          hex-encoded shell command run before the console shell
#                         (hex because the kernel command line splits on spaces)
#   govm.exec=HEX         `govm run --exec CMD`: run CMD (hex-encoded) instead of the
#                         shell, write its exit status (one byte) to the debug-exit
#                         port 0x501 through /dev/port, then reboot -f
# Leaving the console shell ends the VM with `reboot -f` (govm: i8042 reset).
set -eu

die() { echo "mkguest: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: mkguest.sh OUTDIR"
OUT=$1

# Modules the guest loads, in the order the kernel needs them. crc32c_generic is a
# soft dependency of ext4/jbd2 (modules.softdep), which modules.dep does not list.
GUEST_MODULES=${GUEST_MODULES:-"virtio_ring virtio virtio_pci_legacy_dev \
virtio_pci_modern_dev virtio_pci virtio_blk failover net_failover virtio_net \
crc32c_generic crc16 mbcache jbd2 ext4 pvpanic pvpanic_pci"}

# --- Inputs -----------------------------------------------------------------------

SYSROOT=${SYSROOT:-}
SYSROOT=${SYSROOT%/}
if [ -n "${KVER:-}" ]; then
	[ -f "$SYSROOT/boot/vmlinuz-$KVER" ] || die "KVER=$KVER but there is no $SYSROOT/boot/vmlinuz-$KVER"
else
	for k in $(ls "$SYSROOT"/boot/vmlinuz-* 2>/dev/null | sed 's|^.*/vmlinuz-||' | sort -V); do
		[ -f "$SYSROOT/lib/modules/$k/modules.dep" ] && KVER=$k
	done
	[ -n "${KVER:-}" ] ||
		die "no kernel in $SYSROOT/boot: missing package linux-image-amd64 (apt-get install linux-image-amd64)"
fi
KERNEL=$SYSROOT/boot/vmlinuz-$KVER
MODDIR=$SYSROOT/lib/modules/$KVER
[ -f "$MODDIR/modules.dep" ] ||
	die "no $MODDIR/modules.dep: missing package kmod (apt-get install kmod, then depmod $KVER)"

BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || die "no $BUSYBOX: missing package busybox-static (apt-get install busybox-static)"
# A dynamic busybox (package busybox) would need a libc in the initramfs.
if LC_ALL=C ldd "$BUSYBOX" 2>&1 | grep -q '=>'; then
	die "$BUSYBOX is dynamically linked: missing package busybox-static (apt-get install busybox-static)"
fi
for tool in cpio:cpio gzip:gzip; do
	command -v "${tool%%:*}" >/dev/null 2>&1 ||
		die "no ${tool%%:*}: missing package ${tool#*:} (apt-get install ${tool#*:})"
done

SELF=$0
STAMP=$OUT/.mkguest-kver

# --- Cache check ------------------------------------------------------------------

fresh() {
	[ -f "$OUT/bzImage" ] && [ -f "$OUT/initrd.cpio.gz" ] && [ -f "$STAMP" ] || return 1
	[ "$(cat "$STAMP")" = "$KVER" ] || return 1
	for f in "$KERNEL" "$MODDIR/modules.dep" "$BUSYBOX" "$SELF"; do
		for o in "$OUT/bzImage" "$OUT/initrd.cpio.gz"; do
			[ "$o" -nt "$f" ] || return 1
		done
	done
}
if fresh; then
	echo "mkguest: $OUT is up to date (kernel $KVER)"
	exit 0
fi

mkdir -p "$OUT"
WORK=$(mktemp -d "$OUT/.mkguest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

# --- Kernel -----------------------------------------------------------------------

echo "mkguest: copying kernel $KVER"
cp "$KERNEL" "$WORK/bzImage"

# --- Modules: resolve dependencies (depth first, dependencies before users) --------

echo "mkguest: resolving modules from $MODDIR/modules.dep"
# modules.dep lines are "path: dep dep ..."; module names treat '-' and '_' alike.
ORDER=$(awk -v want="$GUEST_MODULES" '
	function norm(p,   n) { n = p; sub(/.*\//, "", n); sub(/\.ko(\.(xz|zst|gz))?$/, "", n); gsub(/-/, "_", n); return n }
	function visit(n,   i, d, k) {
		if (n in state) return
		state[n] = 1
		k = split(deps[n], d, " ")
		for (i = 1; i <= k; i++) visit(norm(d[i]))
		print path[n]
	}
	{
		p = $1; sub(/:$/, "", p); n = norm(p)
		path[n] = p; deps[n] = ""
		for (i = 2; i <= NF; i++) deps[n] = deps[n] " " $i
	}
	END {
		k = split(want, w, " ")
		for (i = 1; i <= k; i++) { n = w[i]; gsub(/-/, "_", n); if (n in path) visit(n) }
	}' "$MODDIR/modules.dep")

ROOT=$WORK/root
mkdir -p "$ROOT/lib/modules" "$ROOT/etc" "$ROOT/bin"
: >"$ROOT/etc/govm-modules"
N=0
for rel in $ORDER; do
	src=$MODDIR/$rel
	name=$(basename "$rel" | sed -E 's/\.ko(\.(xz|zst|gz))?$//')
	dst=$ROOT/lib/modules/$name.ko
	[ -f "$src" ] || die "modules.dep lists $rel but $src is missing (reinstall linux-image-$KVER)"
	# busybox insmod reads plain ELF only: decompress on the host.
	case $rel in
	*.ko.xz)  command -v xz >/dev/null || die "no xz: missing package xz-utils"; xz -dc "$src" >"$dst" ;;
	*.ko.zst) command -v zstd >/dev/null || die "no zstd: missing package zstd"; zstd -qdc "$src" >"$dst" ;;
	*.ko.gz)  gzip -dc "$src" >"$dst" ;;
	*)        cp "$src" "$dst" ;;
	esac
	echo "$name" >>"$ROOT/etc/govm-modules"
	N=$((N + 1))
done
for m in $GUEST_MODULES; do
	grep -qx "$(echo "$m" | tr - _)" "$ROOT/etc/govm-modules" ||
		grep -q "/$m.ko" "$MODDIR/modules.builtin" 2>/dev/null ||
		echo "mkguest: note: module $m not available for $KVER (skipped)"
done

# --- Busybox and applet links -----------------------------------------------------

echo "mkguest: installing busybox ($("$BUSYBOX" --list | wc -l) applets)"
cp "$BUSYBOX" "$ROOT/bin/busybox"
"$BUSYBOX" --list-full | while read -r applet; do
	case $applet in bin/busybox) continue ;; esac
	mkdir -p "$ROOT/$(dirname "$applet")"
	ln -sf /bin/busybox "$ROOT/$applet"
done
mkdir -p "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/tmp" "$ROOT/run" "$ROOT/mnt" "$ROOT/root"

# --- /init ------------------------------------------------------------------------

cat >"$ROOT/init" <<'EOF'
#!/bin/sh
# govm guest init (generated by scripts/mkguest.sh).
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts

# Modules are listed dependencies first; a failure is reported, not fatal, so a
# guest without (say) virtio-net still reaches the shell.
while read -r m; do
	insmod "/lib/modules/$m.ko" || echo "init: insmod $m failed"
done </etc/govm-modules

ip=; gw=; cmd=; exec_cmd=
for arg in $(cat /proc/cmdline); do
	case $arg in
	govm.ip=*)  ip=${arg#govm.ip=} ;;
	govm.gw=*)  gw=${arg#govm.gw=} ;;
	govm.cmd=*) cmd=${arg#govm.cmd=} ;;
	govm.exec=*) exec_cmd=${arg#govm.exec=} ;;
	esac
done

ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
	[ -n "$ip" ] && ip addr add "$ip" dev eth0
	ip link set eth0 up
	[ -n "$gw" ] && ip route add default via "$gw"
fi

echo "govm guest ready"
if [ -n "$cmd" ]; then
	# Hex to text: "6c73" -> "\x6c\x73" -> printf.
	sh -c "$(printf "$(echo "$cmd" | sed 's/../\\x&/g')")"
fi
if [ -n "$exec_cmd" ]; then
	# govm run --exec: the command's status is govm's status. One byte to
	# port 0x501 (/dev/port offset 1281) ends govm at once; the reboot is
	# the fallback (govm then reports that no status arrived).
	setsid cttyhack sh -c "$(printf "$(echo "$exec_cmd" | sed 's/../\\x&/g')")"
	st=$?
	echo "init: command exited with status $st"
	printf "$(printf '\\%03o' $((st & 255)))" | dd of=/dev/port bs=1 seek=1281 count=1 conv=notrunc 2>/dev/null
	reboot -f
fi
setsid cttyhack sh
echo "init: shell exited, rebooting"
reboot -f
EOF
chmod 0755 "$ROOT/init"

# --- Pack -------------------------------------------------------------------------

echo "mkguest: packing initramfs ($N modules)"
# Sorted names, root ownership and gzip -n keep the archive independent of the
# build host's users and timestamps of the gzip wrapper.
(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -6n >"$WORK/initrd.cpio.gz"

mv -f "$WORK/bzImage" "$OUT/bzImage"
mv -f "$WORK/initrd.cpio.gz" "$OUT/initrd.cpio.gz"
echo "$KVER" >"$STAMP"
echo "mkguest: wrote $OUT/bzImage and $OUT/initrd.cpio.gz ($(du -k "$OUT/initrd.cpio.gz" | cut -f1) KiB)"
