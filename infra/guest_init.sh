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

# What a host-userland guest does not see of the host: people's homes (their keys, and
# kbisect's cache and data where they are by default), sshd's host keys, password hashes.
# Not a wall (the guest's root could mount the host again): it keeps a testcase's output
# and mistakes off them. Who may change a testcase is the wall (testcases/manifest.py).
KB_HIDDEN_DIRS="root home etc/ssh"
KB_HIDDEN_FILES="etc/shadow etc/shadow- etc/gshadow etc/gshadow-"
kb_hide_host() {
	for d in $KB_HIDDEN_DIRS; do
		[ -d "$1/$d" ] || continue
		mount -t tmpfs -o mode=0700 tmpfs "$1/$d" || echo "kbisect: cannot hide /$d"
	done
	for f in $KB_HIDDEN_FILES; do
		[ -f "$1/$f" ] || continue
		mount -o bind /dev/null "$1/$f" || echo "kbisect: cannot hide /$f"
	done
}

# The virtio disk whose serial is $1 (the host userland's image), once it shows: /dev/vdX.
kb_virtio_disk() {
	tries=0
	while [ "$tries" -lt 100 ]; do
		for blk in /sys/block/vd*; do
			[ "$(cat "$blk/serial" 2>/dev/null)" = "$1" ] && { echo "/dev/${blk##*/}"; return 0; }
		done
		sleep 0.1
		tries=$((tries + 1))
	done
	return 1
}

# The host's userland, read-only, under an overlay in memory, at /newroot: the host's
# root over virtio-9p (/kbisect/host-root empty), or the squashfs image of its packages
# on the virtio disk whose serial the file holds. Any tool there runs with its libraries.
kb_host_root() {
	mkdir -p /host /rw /newroot
	serial=$(cat /kbisect/host-root)
	if [ -n "$serial" ]; then
		disk=$(kb_virtio_disk "$serial") || { echo "kbisect: no host userland disk"; return 1; }
		mount -t squashfs -o ro "$disk" /host ||
			{ echo "kbisect: cannot mount the host userland image ($disk)"; return 1; }
		echo "kbisect: host userland from the image on $disk"
	else
		mount -t 9p -o ro,trans=virtio,version=9p2000.L,access=any,msize=512000,cache=loose \
			kbhost /host || { echo "kbisect: cannot mount the host root (9p)"; return 1; }
	fi
	mount -t tmpfs -o mode=0755 tmpfs /rw
	mkdir -p /rw/upper /rw/work
	mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work,xino=off \
		overlay /newroot || { echo "kbisect: cannot mount the overlay"; return 1; }
	mount -t proc proc /newroot/proc
	mount -t sysfs sysfs /newroot/sys
	mount -t devtmpfs devtmpfs /newroot/dev
	mount -t debugfs debugfs /newroot/sys/kernel/debug 2>/dev/null || true
	for d in tmp run var/tmp; do
		mount -t tmpfs tmpfs "/newroot/$d"
	done
	kb_hide_host /newroot
	mkdir -p /newroot/kbisect
	cp /kbisect/* /newroot/kbisect/
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	export HOME=/root
}
# Seconds since the kernel started, at init and when the testcase starts: boot and
# userland set-up times, apart from the testcase's own.
kb_emit "{\"event\":\"booted\",\"kernel\":\"$(uname -r)\",\"uptime\":$(kb_now)}"

case " $(cat /proc/cmdline) " in
*" kbisect.probe=1 "*)
	kb_emit '{"event":"done","status":0}'
	reboot -f ;;
esac

. /kbisect/params.sh
# The testcase's modules (a distro kernel's drivers), dependencies first, as the host
# listed them. One that does not load ends the run as the harness's failure (not the
# testcase's: its statuses are its own), saying which.
if [ -e /kbisect/modules ]; then
	while read -r mod; do
		if ! insmod "/lib/modules/kbisect/$mod.ko"; then
			echo "kbisect: cannot load module $mod"
			kb_emit "{\"event\":\"harness-failed\",\"reason\":\"module $mod does not load (insmod failed; see the console)\"}"
			sync
			reboot -f
		fi
	done < /kbisect/modules
	kb_emit "{\"event\":\"modules\",\"loaded\":$(wc -l < /kbisect/modules),\"uptime\":$(kb_now)}"
fi
# The NVMe driver finds its namespaces asynchronously: wait for the disks the run has
# (KB_NDISKS), up to 30 s, before naming them.
tries=0
while [ "$(ls -d /sys/block/nvme* 2>/dev/null | wc -l)" -lt "${KB_NDISKS:-0}" ] && [ "$tries" -lt 300 ]; do
	sleep 0.1
	tries=$((tries + 1))
done
# Disks by serial: namespaces may enumerate in either order.
for blk in /sys/block/nvme*; do
	[ -e "$blk/device/serial" ] || continue
	serial=$(tr -d ' ' < "$blk/device/serial")
	name=$(echo "${serial#kb-}" | tr -c 'a-zA-Z0-9_\n' '_')
	export "KB_DISK_$name=/dev/${blk##*/}"
	echo "kbisect: disk $name is /dev/${blk##*/}"
done
if [ -e /kbisect/host-root ]; then
	if kb_host_root; then
		kb_emit "{\"event\":\"started\",\"uptime\":$(kb_now)}"
		if [ -e /kbisect/trace ]; then  # a traced boot: the script once, under blktrace
			chroot /newroot /bin/sh -c "cd /tmp; . /kbisect/lib.sh; kb_trace_run"
		elif [ -e /kbisect/explain ]; then  # statistics and a profile about the script
			chroot /newroot /bin/sh -c "cd /tmp; . /kbisect/lib.sh; kb_explain_run"
		else
			chroot /newroot /bin/sh -e -c "cd /tmp; . /kbisect/lib.sh; . /kbisect/testcase.sh"
		fi
		status=$?
	else  # the testcase never ran: the console says why
		kb_emit '{"event":"harness-failed","reason":"the host userland does not mount (see the console)"}'
		sync
		reboot -f
	fi
else
	kb_emit "{\"event\":\"started\",\"uptime\":$(kb_now)}"
	cd /tmp
	if [ -e /kbisect/trace ]; then  # blktrace from the initramfs, into debugfs
		mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
		sh -c ". /kbisect/lib.sh; kb_trace_run"
	elif [ -e /kbisect/explain ]; then
		sh -c ". /kbisect/lib.sh; kb_explain_run"
	else
		sh -e -c ". /kbisect/lib.sh; . /kbisect/testcase.sh"
	fi
	status=$?
fi
echo "kbisect: testcase exited with $status"
kb_emit "{\"event\":\"done\",\"status\":$status}"
sync
reboot -f
