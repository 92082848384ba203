#!/bin/sh
# linux.sh OUTDIR — build the project's guest kernel, a minimal Linux from
# Debian's linux-source package, and put it in OUTDIR:
#
#   OUTDIR/bzImage   the kernel govm boots by default (`make run`, the L3 tests)
#   OUTDIR/vmlinux   its ELF with symbols (addr2line, gdb)
#   OUTDIR/config    the .config it was built from
#
# The recipe: `make tinyconfig`, merge guest/linux/govm.config (what any kernel
# needs under govm) and guest/linux/minimal.config (what keeps this one small and
# quick to boot), apply guest/linux/*.patch, `make bzImage`. Every option the two
# fragments ask for must hold after `make olddefconfig`, or the build stops.
#
# Cached outside the clone, keyed by the source package's version, the fragments,
# the patches, this script and the compiler: a second run copies and returns, a
# new machine builds once (~2.5 min on 2 cores). Concurrent runs wait on a lock.
#
# Environment:
#   LINUX_SRC      the source tarball (default /usr/src/linux-source-6.1.tar.xz,
#                  from the Debian package linux-source-6.1)
#   GOVM_CACHE     cache root (default /var/cache/govm; ~/.cache/govm if that is
#                  not writable)
#   LINUX_PATCHES  extra patches applied after guest/linux/*.patch (bench uses
#                  this for a variant QEMU can boot on emulation-only hosts)
#   JOBS           make -j (default: the number of CPUs)
set -eu

die() { echo "linux.sh: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: linux.sh OUTDIR"
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
FRAGS="$HERE/guest/linux/govm.config $HERE/guest/linux/minimal.config"
PATCHES=$(ls "$HERE"/guest/linux/*.patch 2>/dev/null || true)
for p in ${LINUX_PATCHES:-}; do
	[ -f "$p" ] || die "LINUX_PATCHES names $p, which does not exist"
	PATCHES="$PATCHES $(cd "$(dirname "$p")" && pwd)/$(basename "$p")"
done
SRC=${LINUX_SRC:-/usr/src/linux-source-6.1.tar.xz}
[ -f "$SRC" ] || die "no kernel source at $SRC: install the Debian package linux-source-6.1 (scripts/deps.sh does), or set LINUX_SRC"
for t in make gcc flex bison bc perl tar xz; do
	command -v $t >/dev/null 2>&1 || die "no $t: run scripts/deps.sh (it installs the kernel's build tools)"
done
[ -f /usr/include/libelf.h ] || die "no libelf.h: install libelf-dev (scripts/deps.sh does)"

# The source's identity: the package version when dpkg knows the tarball,
# else the tarball's own hash.
srcid=$(dpkg -S "$SRC" 2>/dev/null | cut -d: -f1 | head -n 1 || true)
if [ -n "$srcid" ]; then
	srcid="$srcid $(dpkg-query -W -f='${Version}' "$srcid")"
else
	srcid=$(sha256sum "$SRC" | cut -d' ' -f1)
fi
KEY=$( {
	echo "$srcid"
	gcc --version | head -n 1
	cat "$0" $FRAGS
	for p in $PATCHES; do cat "$p"; done
} | sha256sum | cut -c1-16)

CACHE=${GOVM_CACHE:-/var/cache/govm}
if ! mkdir -p "$CACHE/linux" 2>/dev/null || [ ! -w "$CACHE/linux" ]; then
	CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/govm
	mkdir -p "$CACHE/linux"
fi
DIR=$CACHE/linux/$KEY

install_out() {
	mkdir -p "$OUT"
	for f in bzImage vmlinux config; do
		if ! cmp -s "$DIR/$f" "$OUT/$f"; then
			cp "$DIR/$f" "$OUT/$f.tmp" && mv -f "$OUT/$f.tmp" "$OUT/$f"
		fi
	done
	echo "$KEY" >"$OUT/.key"
}

if [ -f "$DIR/done" ]; then
	install_out
	echo "linux.sh: $OUT/bzImage is up to date ($srcid, key $KEY)"
	exit 0
fi

# One builder at a time per key; a run that waited finds the result.
exec 9>"$CACHE/linux/$KEY.lock"
flock 9
if [ -f "$DIR/done" ]; then
	install_out
	exit 0
fi

WORK=$(mktemp -d "$CACHE/linux/build-$KEY.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
echo "linux.sh: building the guest kernel from $SRC ($srcid) in $WORK (cache key $KEY)"
tar -C "$WORK" -xf "$SRC"
TREE=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d | head -n 1)
[ -f "$TREE/Makefile" ] || die "$SRC holds no kernel tree"
for p in $PATCHES; do
	echo "linux.sh: applying $(basename "$p")"
	patch -d "$TREE" -p1 --quiet --forward <"$p" || die "$p does not apply to $srcid"
done

cd "$TREE"
make -s tinyconfig >/dev/null
# shellcheck disable=SC2086
scripts/kconfig/merge_config.sh -m .config $FRAGS >/dev/null
make -s olddefconfig >/dev/null
# Every line of the fragments must hold: an option that a dependency
# turned off would otherwise be missed until a test fails.
bad=""
for f in $FRAGS; do
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*) grep -qx "$line" .config || bad="$bad $line" ;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }; opt=${opt%% *}
			grep -q "^$opt=" .config && bad="$bad $line" ;;
		esac
	done <"$f"
done
[ -z "$bad" ] || die "these options did not hold after olddefconfig (a dependency is missing):$bad"

JOBS=${JOBS:-$(nproc)}
start=$(date +%s)
make -s -j"$JOBS" bzImage KBUILD_BUILD_USER=govm KBUILD_BUILD_HOST=govm \
	|| die "kernel build failed"
echo "linux.sh: built in $(( $(date +%s) - start )) s"

mkdir -p "$DIR"
cp arch/x86/boot/bzImage "$DIR/bzImage"
cp vmlinux "$DIR/vmlinux"
cp .config "$DIR/config"
touch "$DIR/done"
# Keep the four newest builds (a config or source change makes a new one).
ls -1dt "$CACHE"/linux/*/ 2>/dev/null | tail -n +5 | while read -r old; do
	[ -f "$old/done" ] && rm -rf "$old" && rm -f "${old%/}.lock"
done
install_out
echo "linux.sh: wrote $OUT/bzImage ($(du -k "$OUT/bzImage" | cut -f1) KiB)"
