#!/bin/sh
# kbisect guest init. Results leave on a dedicated channel (/dev/ttyS1) as framed lines
# "KBISECT <json>"; the console (ttyS0) is for people and for panic detection.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /tmp /run && mount -t tmpfs tmpfs /tmp
export KB_CHANNEL=/dev/ttyS1
. /kbisect/lib.sh
kb_emit "{\"event\":\"booted\",\"kernel\":\"$(uname -r)\"}"

case " $(cat /proc/cmdline) " in
*" kbisect.probe=1 "*)
	kb_emit '{"event":"done","status":0}'
	reboot -f ;;
esac

# Disks by serial: namespaces may enumerate in either order.
for blk in /sys/block/nvme*; do
	[ -e "$blk/device/serial" ] || continue
	serial=$(tr -d ' ' < "$blk/device/serial")
	name=$(echo "${serial#kb-}" | tr -c 'a-zA-Z0-9_\n' '_')
	export "KB_DISK_$name=/dev/${blk##*/}"
	echo "kbisect: disk $name is /dev/${blk##*/}"
done
. /kbisect/params.sh
kb_emit '{"event":"started"}'
cd /tmp
sh -e -c ". /kbisect/lib.sh; . /kbisect/testcase.sh"
status=$?
echo "kbisect: testcase exited with $status"
kb_emit "{\"event\":\"done\",\"status\":$status}"
sync
reboot -f
