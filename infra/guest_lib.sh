# Helpers for testcase scripts, sourced in the guest.
kb_emit() {
	echo "KBISECT $1" > "$KB_CHANNEL"
}
# kb_metric REP NAME VALUE: one sample of a metric for repetition REP.
kb_metric() {
	kb_emit "{\"event\":\"metric\",\"rep\":$1,\"name\":\"$2\",\"value\":$3}"
	echo "kbisect: rep $1 $2 = $3"
}
# kb_now: seconds since boot, 10 ms resolution (busybox date has no %N).
kb_now() {
	cut -d' ' -f1 /proc/uptime
}
# kb_stat DEV: "reads merges sectors" completed so far on block device DEV (e.g. nvme0n1).
kb_stat() {
	awk '{print $1, $2, $3}' "/sys/block/$1/stat"
}
