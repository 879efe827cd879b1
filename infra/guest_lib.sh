# Helpers for testcase scripts, sourced in the guest.
kb_emit() {
	echo "KBISECT $1" > "$KB_CHANNEL"
}
# kb_metric REP NAME VALUE: one sample of a metric for repetition REP.
kb_metric() {
	# The traced repetition's figures are reported apart: tracing slows I/O down.
	event=metric
	[ -z "$KB_TRACING" ] || event=traced-metric
	kb_emit "{\"event\":\"$event\",\"rep\":$1,\"name\":\"$2\",\"value\":$3}"
	echo "kbisect: rep $1 $2 = $3${KB_TRACING:+ (traced)}"
}
# kb_now: seconds since boot, 10 ms resolution (busybox date has no %N).
kb_now() {
	cut -d' ' -f1 /proc/uptime
}
# kb_stat DEV: "reads merges sectors" completed so far on block device DEV (e.g. nvme0n1).
kb_stat() {
	awk '{print $1, $2, $3}' "/sys/block/$1/stat"
}
# kb_trace_run: the testcase once (KB_REPETITIONS=1) under blktrace on its disks, in a
# boot of its own (a script sets its disks up once a boot). Per disk it leaves the binary
# trace, the events (action, RWBS, sectors), btt's report and per-I/O latencies, and
# writes them all as a tar onto the kbtrace disk for the host. Its status is the script's.
kb_trace_run() {
	dir=/tmp/kbtrace
	mkdir -p "$dir"
	: > "$dir/disks"
	set --
	for var in $(env | sed -n 's/^\(KB_DISK_[A-Za-z0-9_]*\)=.*/\1/p'); do
		name=${var#KB_DISK_}
		[ "$name" = kbtrace ] && continue
		eval "dev=\$$var"
		echo "$name ${dev#/dev/}" >> "$dir/disks"
		set -- "$@" -d "$dev"
	done
	blktrace "$@" -D "$dir" > "$dir/blktrace.log" 2>&1 &
	pid=$!
	sleep 2  # blktrace sets up its relay buffers
	st=0
	KB_REPETITIONS=1 KB_TRACING=1 sh -e -c ". /kbisect/lib.sh; . /kbisect/testcase.sh" || st=$?
	kill -INT "$pid"
	wait "$pid"
	while read -r name dev; do
		blkparse -i "$dev" -D "$dir" -d "$dir/$dev.bin" -q -f "%a %d %n %S %T %t\n" \
			-o "$dir/$dev.events" > "$dir/$dev.blkparse.log" 2>&1
		btt -i "$dir/$dev.bin" -q "$dir/$dev" -l "$dir/$dev" > "$dir/$dev.btt" 2>&1
		echo "kbisect: traced $name ($dev): $(wc -l < "$dir/$dev.events") events"
	done < "$dir/disks"
	tar -cf "$KB_DISK_kbtrace" -C "$dir" .
	return "$st"
}
# kb_proc_read DIR: the /proc files an explain boot compares (KB_PROC_FILES), and the
# uptime.
kb_proc_read() {
	for f in $(echo "$KB_PROC_FILES" | tr : ' '); do
		[ -e "/proc/$f" ] && cat "/proc/$f" > "$1/$f"
	done
	kb_now > "$1/uptime"
}
# kb_explain_run: the testcase (its usual repetitions) between two reads of the system's
# statistics, under perf where the guest has it: `perf stat`'s software counters and a
# `perf record` of the cpu-clock event (TCG guests have no PMU) with call graphs, its
# samples written out by `perf script` against this kernel's symbols. All of it goes as a
# tar onto the kbexplain disk for the host. Its status is the script's.
kb_explain_run() {
	dir=/tmp/kbexplain
	mkdir -p "$dir/before" "$dir/after"
	run=". /kbisect/lib.sh; . /kbisect/testcase.sh"
	# schedstats' counters count only once switched on (a kernel built with them boots
	# with them off)
	[ -w /proc/sys/kernel/sched_schedstats ] && echo 1 > /proc/sys/kernel/sched_schedstats
	kb_proc_read "$dir/before"
	if command -v perf > /dev/null; then
		perf record -q -e cpu-clock -F 499 -a -g -o "$dir/perf.data" -- \
			perf stat -x, -o "$dir/perf-stat.csv" -a \
			-e "$(echo "$KB_PERF_EVENTS" | tr : ,)" -- \
			sh -c "sh -e -c '$run'; echo \$? > $dir/status"
	else
		sh -c "sh -e -c '$run'; echo \$? > $dir/status"
	fi
	kb_proc_read "$dir/after"
	if [ -e "$dir/perf.data" ]; then
		perf script -i "$dir/perf.data" -F comm,ip,sym > "$dir/perf.script" 2> "$dir/perf.log"
		rm -f "$dir/perf.data"
		echo "kbisect: profiled: $(grep -c '^[^[:space:]]' "$dir/perf.script") samples"
	fi
	tar -cf "$KB_DISK_kbexplain" -C "$dir" .
	return "$(cat "$dir/status" 2> /dev/null || echo 1)"
}
