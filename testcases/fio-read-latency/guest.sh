# fio-read-latency: runs on the host's root filesystem (dash, fio, python3) under `sh -e`,
# with the kb_* helpers, KB_DISK_data, the manifest's params and KB_REPETITIONS.
dev=${KB_DISK_data#/dev/}
case " $(cat "/sys/block/$dev/queue/scheduler") " in
*" $SCHED "* | *"[$SCHED]"*) ;;
*)  # git bisect run's "cannot test": this kernel lacks the scheduler, no verdict on it
	echo "kbisect: this kernel has no $SCHED I/O scheduler: $(cat "/sys/block/$dev/queue/scheduler")"
	exit 125 ;;
esac
echo "$SCHED" > "/sys/block/$dev/queue/scheduler"
echo "$QDEPTH" > "/sys/block/$dev/queue/nr_requests"
echo "kbisect: $dev scheduler $(cat /sys/block/$dev/queue/scheduler), nr_requests $(cat /sys/block/$dev/queue/nr_requests), wbt_lat_usec $(cat /sys/block/$dev/queue/wbt_lat_usec 2>/dev/null || echo -)"
export KB_DEV="$KB_DISK_data" WRITE_MIB READERS
export READ_OFFSET_MIB=$((WRITE_MIB + 8))
rep=1
while [ "$rep" -le "$KB_REPETITIONS" ]; do
	sync
	echo 3 > /proc/sys/vm/drop_caches
	fio --output-format=json --output=/tmp/fio.json /kbisect/readers.fio
	python3 - "$rep" /tmp/fio.json <<'PY' > /tmp/metrics
import json, sys
rep, jobs = sys.argv[1], json.load(open(sys.argv[2]))["jobs"]
readers = [j for j in jobs if j["jobname"] == "reader"]
writer = next(j for j in jobs if j["jobname"] == "writer")
pct = lambda j, p: j["read"]["clat_ns"].get("percentile", {}).get(p, 0)
lat = lambda ns: f"{ns / 1e6:.3f}"
print("read_lat_p99", lat(max(pct(j, "99.000000") for j in readers)))
print("read_lat_max", lat(max(j["read"]["clat_ns"]["max"] for j in readers)))
print("reader_runtime_max", max(j["read"]["runtime"] for j in readers))
print("writer_throughput", f'{writer["write"]["bw_bytes"] / 1e6:.1f}')
PY
	while read -r name value; do
		kb_metric "$rep" "$name" "$value"
	done < /tmp/metrics
	rep=$((rep + 1))
done
