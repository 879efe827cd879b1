# sched-pipe: runs on the host's root filesystem (dash, perf) under `sh -e`, with the kb_*
# helpers, the manifest's params and KB_REPETITIONS (warm-up ones included).
rep=1
while [ "$rep" -le "$KB_REPETITIONS" ]; do
	out=$(perf bench sched pipe -l "$LOOPS")
	echo "$out"
	usecs=$(echo "$out" | awk '$2 == "usecs/op" {print $1}')
	ops=$(echo "$out" | awk '$2 == "ops/sec" {print $1}')
	[ -n "$usecs" ] && [ -n "$ops" ] || { echo "kbisect: no figures from perf bench"; exit 1; }
	kb_metric "$rep" usecs_per_op "$usecs"
	kb_metric "$rep" ops_per_sec "$ops"
	rep=$((rep + 1))
done
