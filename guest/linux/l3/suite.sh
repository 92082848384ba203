#!/bin/sh
# The L3 suite: what a user does with govm's default guest, done by Linux's
# own drivers. e2e's TestLinuxL3 appends this directory to the default
# initramfs (as /l3) and boots it with govm.cmd='/l3/suite.sh HOST_IP;
# poweroff -f' (the poweroff is checked too).
#
# It prints one line per check in the test kernel's protocol (guest/README.md):
#   RESULT <name> pass|fail key=value ...
# and mostly reports what it saw (checksums, feature bits, counters): the Go
# test judges those against the host's side (the images, the sent bytes).
# Every command here costs a fork and exec, ~0.2 s when the guest kernel is
# emulated, so checks read sysfs with the shell's own `read` where they can.
#
# Expects: disks vda (read-write, the host's pattern), vdb (read-only), vdc
# (ext4 holding hello.txt); eth0 with an address on HOST's network; /l3/blob
# (1 MiB from the host). Network steps wait for the host at TCP ports
# 7001 (go on), and send to / read from 7002 and 7003.
HOST=$1

res() { echo "RESULT $*"; }

# --- devices: which driver bound each virtio device, with what features ----
for d in /sys/bus/virtio/devices/virtio*; do
	read -r dev <"$d/device"
	read -r feat <"$d/features"
	drv=$(readlink "$d/driver")
	res "dev-${d##*/}" pass "device=$dev driver=${drv##*/} features=$feat"
done
for p in /sys/bus/pci/drivers/pvpanic-pci/0000:*; do
	[ -e "$p" ] && res pvpanic pass "dev=${p##*/}" || res pvpanic fail "dev=none"
done

# --- entropy: virtio-rng behind /dev/hwrng ----------------------------------
read -r cur </sys/class/misc/hw_random/rng_current || cur=none
hx=$(head -c 1024 /dev/hwrng | od -An -v -tx1)
n=$(echo $hx | wc -w)
d=$(echo $hx | tr ' ' '\n' | sort -u | wc -l)
res hwrng pass "current=$cur bytes=$n distinct=$d"

# --- block ------------------------------------------------------------------
sum=$(md5sum </dev/vda)
res vda-read pass "md5=${sum%% *}"
read -r wc </sys/block/vda/queue/write_cache
set -- $(cat /sys/block/vda/stat)
flush0=${16:-none}
# 256 KiB of the blob at 1 MiB, then fsync: Linux flushes the device's
# write cache with VIRTIO_BLK_T_FLUSH.
if dd if=/l3/blob of=/dev/vda bs=64k seek=16 count=4 conv=fsync 2>/dev/null; then v=pass; else v=fail; fi
set -- $(cat /sys/block/vda/stat)
res vda-write $v "write_cache=$(echo $wc | tr ' ' _) flushes=$((${16:-0} - ${flush0:-0}))"
sum=$(dd if=/dev/vda bs=64k skip=16 count=4 iflag=direct 2>/dev/null | md5sum)
res vda-readback pass "md5=${sum%% *}"
read -r ro </sys/block/vdb/ro
if dd if=/l3/blob of=/dev/vdb bs=4k count=1 conv=fsync 2>/dev/null; then w=wrote; else w=refused; fi
res vdb-ro pass "ro=$ro write=$w"
if mount -t ext4 /dev/vdc /mnt && read -r hello </mnt/hello.txt &&
	echo written-by-guest >/mnt/out.txt && umount /mnt; then v=pass; else v=fail; fi
res vdc-ext4 $v "hello=$(echo $hello | tr ' ' _)"

# --- network ------------------------------------------------------------------
read -r mtu </sys/class/net/eth0/mtu
read -r oper </sys/class/net/eth0/operstate
res eth0 pass "mtu=$mtu operstate=$oper"
# "3 packets transmitted, 3 packets received, 0% packet loss"
set -- $(ping -c 3 -W 5 "$HOST" 2>&1 | grep 'packets transmitted')
res ping-host pass "sent=${1:-none} received=${4:-none}"
# 1 MiB each way over TCP; the host checks the bytes it got and tells the
# checksum of the bytes it sent.
if nc "$HOST" 7002 </l3/blob; then v=pass; else v=fail; fi
res tcp-out $v
sum=$(nc "$HOST" 7003 | md5sum)
res tcp-in pass "md5=${sum%% *}"
# A flood the other way: each request as soon as the reply came (busybox
# has no -f).
set -- $(ping -q -A -c 200 -w 60 "$HOST" 2>&1 | grep 'packets transmitted')
res ping-flood-host pass "sent=${1:-none} received=${4:-none}"
# The host pings this guest (ping and ping -f) while the guest waits here.
echo "L3 net-ready"
nc -l -p 7001 >/dev/null
res host-done pass
read -r rxp </sys/class/net/eth0/statistics/rx_packets
read -r txp </sys/class/net/eth0/statistics/tx_packets
read -r rxe </sys/class/net/eth0/statistics/rx_errors
read -r rxd </sys/class/net/eth0/statistics/rx_dropped
res eth0-stats pass "rx_packets=$rxp tx_packets=$txp rx_errors=$rxe rx_dropped=$rxd"
echo "L3 done"
