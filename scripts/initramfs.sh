#!/bin/sh
# initramfs.sh OUT — pack the default guest's initramfs: Debian's static busybox
# (package busybox-static) and guest/linux/init.
#
# Uncompressed: the guest kernel unpacks it in KVM's instruction emulator on
# emulation-only hosts, where a gzip inflate costs seconds.
# Rebuilt only when busybox, the init or this script is newer than OUT.
set -eu

die() { echo "initramfs.sh: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: initramfs.sh OUT"
OUT=$1
HERE=$(cd "$(dirname "$0")/.." && pwd)
INIT=$HERE/guest/linux/init
BUSYBOX=/bin/busybox

[ -x "$BUSYBOX" ] || die "no $BUSYBOX: install busybox-static (scripts/deps.sh does)"
if LC_ALL=C ldd "$BUSYBOX" 2>&1 | grep -q '=>'; then
	die "$BUSYBOX is dynamically linked: install busybox-static, not busybox"
fi
command -v cpio >/dev/null 2>&1 || die "no cpio: install cpio (scripts/deps.sh does)"

if [ -f "$OUT" ] && [ "$OUT" -nt "$BUSYBOX" ] && [ "$OUT" -nt "$INIT" ] && [ "$OUT" -nt "$0" ]; then
	echo "initramfs.sh: $OUT is up to date"
	exit 0
fi

mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/govm-initramfs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
ROOT=$WORK/root
mkdir -p "$ROOT/bin" "$ROOT/etc" "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/tmp" \
	"$ROOT/run" "$ROOT/mnt" "$ROOT/root"
cp "$BUSYBOX" "$ROOT/bin/busybox"
# Debian's busybox runs its applets from its shell without links
# (FEATURE_SH_STANDALONE), and each of ~400 applet links costs ~12 ms of
# emulated unpacking: only the paths other programs exec by name.
mkdir -p "$ROOT/usr/bin"
ln -s busybox "$ROOT/bin/sh"
ln -s ../../bin/busybox "$ROOT/usr/bin/env"
env -i PATH=/nonexistent "$BUSYBOX" sh -c 'echo x | cat >/dev/null' ||
	die "$BUSYBOX cannot run its applets without links"
cp "$INIT" "$ROOT/init"
chmod 0755 "$ROOT/init"
cat >"$ROOT/etc/profile" <<'PROFILE'
export PS1='root@govm:\w# '
# No init daemon to ask: Linux itself powers off, halts or resets.
poweroff() { /bin/busybox poweroff -f; }
halt() { /bin/busybox halt -f; }
reboot() { /bin/busybox reboot -f; }
PROFILE
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
cat >"$ROOT/etc/fstab" <<'FSTAB'
proc /proc proc defaults 0 0
sysfs /sys sysfs defaults 0 0
devtmpfs /dev devtmpfs defaults 0 0
FSTAB

# Sorted names and root ownership: the archive depends only on its inputs.
(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$OUT.tmp"
mv -f "$OUT.tmp" "$OUT"
echo "initramfs.sh: wrote $OUT ($(du -k "$OUT" | cut -f1) KiB)"
