# nvme-snapshot-read: runs in the guest under `sh -e`, with kb_* helpers from lib.sh,
# KB_DISK_<name> for each disk and the manifest's params (READ_MIB, KB_REPETITIONS).
origin=$KB_DISK_origin
cow=$KB_DISK_cow
dev=${origin#/dev/}
sectors=$(blockdev --getsz "$origin")
# No udev in the guest: dmsetup makes its own nodes.
export DM_DISABLE_UDEV=1
dmsetup --noudevsync create kb-origin --table "0 $sectors snapshot-origin $origin"
dmsetup --noudevsync create kb-snap --table "0 $sectors snapshot $origin $cow N 8"
echo "kbisect: $dev nomerges=$(cat /sys/block/$dev/queue/nomerges)"
rep=1
while [ "$rep" -le "$KB_REPETITIONS" ]; do
	sync
	echo 3 > /proc/sys/vm/drop_caches
	set -- $(kb_stat "$dev")
	r0=$1 m0=$2 s0=$3
	t0=$(kb_now)
	dd if=/dev/mapper/kb-snap of=/dev/null bs=1M count="$READ_MIB" 2>/dev/null
	t1=$(kb_now)
	set -- $(kb_stat "$dev")
	reads=$(($1 - r0)) merges=$(($2 - m0)) sect=$(($3 - s0))
	kb_metric "$rep" reads "$reads"
	kb_metric "$rep" merges "$merges"
	kb_metric "$rep" avg_read_sectors "$(awk -v s="$sect" -v r="$reads" 'BEGIN{printf "%.1f", r ? s / r : 0}')"
	kb_metric "$rep" wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')"
	kb_metric "$rep" throughput "$(awk -v m="$READ_MIB" -v a="$t0" -v b="$t1" 'BEGIN{d = b - a; if (d < 0.01) d = 0.01; printf "%.1f", m * 1.048576 / d}')"
	rep=$((rep + 1))
done
