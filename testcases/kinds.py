"""Testcases named by a kind and its parameters, the community's stock benchmarks:
`stress-ng:switch`, `hackbench:pipe:8`, `perf-bench:futex-hash`, `sysbench:cpu`, `cyclictest`,
`iperf3:udp:rx`. Each kind is one template that renders a testcase folder (manifest, guest
script, config fragment), the folder `kbisect testcase new NAME --from KIND` writes for a
person to edit; named directly, the folder is rendered into the cache and loaded from there,
on every host alike (a kind's rendering depends only on its name).

They run on the host's userland (the tools come from Debian's packages: stress-ng,
rt-tests, sysbench, linux-perf, iperf3) and report through kb_metric like any testcase.
"""

import functools
import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.errors import UnknownTestcaseError, UserError
from kbisect.infra.atomic_write import publish_folder
from kbisect.testcases import fio_job, kselftest, net_throughput

# KIND[:ARG...]: a kind's name, then its arguments, of the characters of a manifest's
# param values less '/' and ':' (they end up in params and in a job's id).
KIND_NAME_RE = re.compile(r"^([a-z0-9][a-z0-9-]{0,31})((?::[A-Za-z0-9_.+-]{1,64}){0,8})$")
FRAGMENT = "# nothing beyond the base config and the host userland's options\n"


@dataclass(frozen=True)
class Rendered:
    """A kind's testcase: the text of its manifest, guest script and config fragment, and
    the files its guest reads from /kbisect/ (an imported fio job)."""

    manifest: str
    script: str
    fragment: str = FRAGMENT
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Kind:
    name: str
    usage: str  # "stress-ng:STRESSOR[:WORKERS]"
    description: str
    render: Callable[[str, list[str]], Rendered]  # (testcase name, arguments)
    check: Callable[[list[str]], None] = lambda _: None  # what only a host's tools can tell
    imported: bool = False  # its argument is a file of the user's: `testcase new --from` only


def _manifest(
    name: str,
    description: str,
    tools: tuple[str, ...],
    primary: str,
    metrics: dict[str, tuple[str, str, str]],
    params: dict[str, str],
    repetitions: int = 3,
    timeout: int = 600,
    files: tuple[str, ...] = (),
    disks: dict[str, int] | None = None,
    peer: str = "",
) -> str:
    """A host-userland manifest; metrics: name -> (unit, better, description); disks:
    name -> MiB, each an NVMe disk the script finds at KB_DISK_<name>; peer: the program
    the host runs beside the guest (testcases.net_throughput)."""
    lines = [
        f"# {description}",
        f"name = {_toml(name)}",
        f"description = {_toml(description)}",
        f"primary = {_toml(primary)}",
        f"repetitions = {repetitions}",
        "warmup = 1               # the first run warms caches (TCG's code cache): not scored",
        f"timeout = {timeout}",
        f"tools = {json.dumps(list(tools))}",
        'config = "config.fragment"',
        'script = "guest.sh"',
        'userland = "host"        # the tool and its libraries from the host\'s root filesystem',
    ]
    if files:
        lines.append(f"files = {json.dumps(list(files))}   # shipped to /kbisect/ in the guest")
    if peer:
        lines.append(f"peer = {_toml(peer)}   # the host's client, connecting into the guest")
    lines += ["", "[params]", *(f"{key} = {_toml(value)}" for key, value in params.items())]
    for disk, mib in (disks or {}).items():
        lines += ["", "[[disks]]", f"name = {_toml(disk)}", f"size_mib = {mib}"]
    for metric, (unit, better, text) in metrics.items():
        lines += ["", f"[metrics.{metric}]", f"unit = {_toml(unit)}", f"better = {_toml(better)}"]
        lines.append(f"description = {_toml(text)}")
    return "\n".join(lines) + "\n"


def _toml(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these)."""
    return json.dumps(text)


def _script(name: str, body: str, prelude: str = "") -> str:
    """A guest script: `prelude` once, then KB_REPETITIONS runs of `body`, which reports
    with kb_metric "$rep"."""
    return (
        f"# {name}: runs on the host's root filesystem under `sh -e`, with the kb_* helpers,\n"
        "# the manifest's params, KB_DISK_<name> for each disk and KB_REPETITIONS (warm-up\n"
        "# ones included).\n"
        f"{prelude}"
        "rep=1\n"
        'while [ "$rep" -le "$KB_REPETITIONS" ]; do\n'
        f"{body}"
        "\trep=$((rep + 1))\n"
        "done\n"
    )


def _one_figure(
    name: str,
    title: str,
    command: str,
    awk: str,
    metric: tuple[str, str, str, str],
    params: dict[str, str],
    repetitions: int = 3,
) -> Rendered:
    """A kind whose tool prints one figure a run: `command`'s output (`title` names it), the
    figure read by the awk program `awk`; metric: (name, unit, better, description)."""
    tool = command.split()[0]
    key, unit, better, text = metric
    body = (
        f"\tout=$({command})\n"
        '\techo "$out"\n'
        f"\tvalue=$(echo \"$out\" | awk '{awk}')\n"
        f'\t[ -n "$value" ] || {{ echo "kbisect: no figures from {tool}"; exit 1; }}\n'
        f'\tkb_metric "$rep" {key} "$value"\n'
    )
    description = f"{title}: {text}"
    manifest = _manifest(
        name, description, (tool,), key, {key: (unit, better, text)}, params, repetitions
    )
    return Rendered(manifest, _script(name, body))


def _number(value: str, what: str, lo: int, hi: int, usage: str) -> str:
    if not value.isdigit() or not lo <= int(value) <= hi:
        raise UserError(f"{what} must be a whole number from {lo} to {hi}, not {value!r}: {usage}")
    return str(int(value))


def _choice(value: str, choices: tuple[str, ...], what: str, usage: str) -> str:
    if value not in choices:
        raise UnknownTestcaseError(
            f"unknown {what} {value!r}: one of {', '.join(choices)} ({usage})"
        )
    return value


def _arity(args: list[str], most: int, usage: str) -> None:
    if len(args) > most:
        raise UserError(f"too many arguments: {usage}")


STRESS_NG = "stress-ng:STRESSOR[:WORKERS]"
STRESSOR_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")


@functools.cache
def _host_stressors() -> frozenset[str] | None:
    """This host's stress-ng's stressors; None without stress-ng."""
    if shutil.which("stress-ng") is None:
        return None
    out = subprocess.run(
        ["stress-ng", "--stressors"], capture_output=True, text=True, timeout=30, check=False
    )
    return frozenset(out.stdout.split()) if out.returncode == 0 else None


def _stressors(args: list[str]) -> None:
    """The stressor is one of this host's stress-ng (a VM host's runs it: a host without
    stress-ng, a build host, leaves the check to the others)."""
    known = _host_stressors()
    if known is not None and args[0] not in known:
        raise UnknownTestcaseError(
            f"unknown stressor {args[0]!r}: 'stress-ng --stressors' lists this host's"
        )


def _stress_ng(name: str, args: list[str]) -> Rendered:
    if not args:
        raise UserError(f"name a stressor: {STRESS_NG}, e.g. stress-ng:switch")
    stressor = args[0]
    if not STRESSOR_RE.fullmatch(stressor):
        raise UnknownTestcaseError(f"{stressor!r} is no stressor's name: {STRESS_NG}")
    _arity(args, 3 if stressor == "hdd" else 2, HDD if stressor == "hdd" else STRESS_NG)
    workers = _number(args[1], "WORKERS", 1, 64, STRESS_NG) if len(args) > 1 else "1"
    params = {"STRESSOR": stressor, "WORKERS": workers, "SECONDS_EACH": "5"}
    on_disk = stressor in IO_STRESSORS
    description = f"stress-ng --{stressor} {workers}: bogo operations per second" + (
        " on ext4 on an NVMe disk" if on_disk else ""
    )
    options = ""
    if stressor == "hdd":
        params["HDD_BYTES"] = "64m"  # each worker's file: the disk holds 64 workers' twice
        options = '\t\t--hdd-bytes "$HDD_BYTES" \\\n'
        if len(args) > 2:
            params["HDD_OPTS"] = _hdd_opts(args[2])
            options += '\t\t--hdd-opts "$(echo "$HDD_OPTS" | tr + ,)" \\\n'
    body = (
        '\tstress-ng --"$STRESSOR" "$WORKERS" --timeout "${SECONDS_EACH}s" --metrics-brief \\\n'
        f"{options}"
        f"\t\t--temp-path {IO_MOUNT if on_disk else '/tmp'} --yaml /tmp/kb-stress.yaml\n"
        "\tops=$(awk '$1 == \"bogo-ops-per-second-real-time:\" {print $2; exit}' "
        "/tmp/kb-stress.yaml)\n"
        "\tcpu=$(awk '$1 == \"bogo-ops-per-second-usr-sys-time:\" {print $2; exit}' "
        "/tmp/kb-stress.yaml)\n"
        '\t[ -n "$ops" ] || { echo "kbisect: no figures from stress-ng"; exit 1; }\n'
        '\tkb_metric "$rep" ops_per_sec "$ops"\n'
        '\t[ -z "$cpu" ] || kb_metric "$rep" ops_per_cpu_sec "$cpu"\n'
    )
    metrics = {
        "ops_per_sec": ("ops/s", "higher", "bogo operations per second of wall time"),
        "ops_per_cpu_sec": ("ops/s", "higher", "bogo operations per second of CPU time"),
    }
    if not on_disk:
        return Rendered(
            _manifest(name, description, ("stress-ng",), "ops_per_sec", metrics, params),
            _script(name, body),
        )
    manifest = _manifest(
        name,
        description,
        ("stress-ng", "mkfs.ext4"),
        "ops_per_sec",
        metrics,
        params,
        disks={"data": IO_DISK_MIB},
    )
    return Rendered(manifest, _script(name, body, IO_PRELUDE), IO_FRAGMENT)


HDD = "stress-ng:hdd[:WORKERS[:OPTS]], OPTS stress-ng's --hdd-opts joined by + (direct+rd-seq)"
# stress-ng 0.15's --hdd-opts
HDD_OPTS = frozenset(
    {"direct", "dsync", "iovec", "fsync", "fdatasync", "noatime", "sync", "syncfs", "utimes"}
    | {"rd-rnd", "rd-seq", "wr-rnd", "wr-seq", "fadv-dontneed", "fadv-noreuse", "fadv-normal"}
    | {"fadv-rnd", "fadv-seq", "fadv-willneed"}
)
# The stressors that do file I/O: they run on ext4 on an NVMe disk of their own (where a
# block-layer or driver change shows, direct I/O reaching the device), not on the
# guest's tmpfs.
IO_STRESSORS = frozenset({"hdd", "aio", "aiol", "iomix", "readahead", "rawdev", "seek"})
IO_MOUNT = "/tmp/kb-io"
IO_DISK_MIB = 1024
IO_FRAGMENT = "# the file system the I/O stressors run on\nCONFIG_EXT4_FS=y\n"
# Inode tables and journal written now, so no lazy-init thread writes during the runs.
IO_PRELUDE = (
    'mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$KB_DISK_data"\n'
    f"mkdir -p {IO_MOUNT}\n"
    f'mount -t ext4 "$KB_DISK_data" {IO_MOUNT}\n'
)


def _hdd_opts(text: str) -> str:
    unknown = [o for o in text.split("+") if o not in HDD_OPTS]
    if unknown:
        raise UnknownTestcaseError(
            f"unknown --hdd-opts {unknown[0]!r}: of {', '.join(sorted(HDD_OPTS))} ({HDD})"
        )
    return text


HACKBENCH = "hackbench[:pipe|socket][:GROUPS]"


def _hackbench(name: str, args: list[str]) -> Rendered:
    _arity(args, 2, HACKBENCH)
    mode = _choice(args[0], ("pipe", "socket"), "hackbench mode", HACKBENCH) if args else "socket"
    groups = _number(args[1], "GROUPS", 1, 64, HACKBENCH) if len(args) > 1 else "4"
    metric = ("seconds", "s", "lower", "time to pass every message (LKP's throughput, inverted)")
    command = 'hackbench $([ "$MODE" != pipe ] || echo -p) -g "$GROUPS" -l "$LOOPS"'
    params = {"MODE": mode, "GROUPS": groups, "LOOPS": "200"}
    awk = '$1 == "Time:" {print $2}'
    return _one_figure(name, f"hackbench over {mode}s", command, awk, metric, params, 5)


PERF_BENCH = "perf-bench:sched-messaging|sched-pipe|futex-hash|mem-memcpy"
# sub-benchmark: (perf bench arguments, awk program printing the figure, metric)
PERF_BENCHES = {
    "sched-messaging": ("sched messaging -g 4 -l 200", '$1 == "Total" && $2 == "time:" {print $3}',
                        ("seconds", "s", "lower", "time to pass every message")),
    "sched-pipe": ("sched pipe -l 20000", '$2 == "usecs/op" {print $1}',
                   ("usecs_per_op", "us", "lower", "time of one pipe round trip")),
    "futex-hash": ("futex hash -r 3", '$1 == "Averaged" {print $2}',
                   ("ops_per_sec", "ops/s", "higher", "futex hash operations per second")),
    # glibc's memcpy only (perf runs every function it knows otherwise), GB/s from MB/s
    "mem-memcpy": ("mem memcpy -f default -s 64MB -l 4",
                   '$2 == "GB/sec" {print $1} $2 == "MB/sec" {print $1 / 1000}',
                   ("gb_per_sec", "GB/s", "higher", "memcpy bandwidth")),
}  # fmt: skip


def _perf_bench(name: str, args: list[str]) -> Rendered:
    if not args:
        raise UserError(f"name a benchmark: {PERF_BENCH}")
    _arity(args, 1, PERF_BENCH)
    bench = _choice(args[0], tuple(PERF_BENCHES), "perf bench", PERF_BENCH)
    argv, awk, metric = PERF_BENCHES[bench]
    title = f"perf bench {bench.replace('-', ' ')}"
    return _one_figure(name, title, f"perf bench {argv} 2>&1", awk, metric, {}, 5)


SYSBENCH = "sysbench:cpu|memory|threads|mutex"
# test: (awk program printing the figure, metric); threads' figure is events per second
SYSBENCHES = {
    "cpu": ('$1 == "events" && $3 == "second:" {print $4}',
            ("events_per_sec", "events/s", "higher", "prime-search events per second")),
    "memory": ('$3 == "transferred" {gsub(/[(]/, "", $4); print $4}',
               ("mib_per_sec", "MiB/s", "higher", "memory write bandwidth")),
    "threads": ('/total time:/ {t = $3; sub(/s$/, "", t)} /total number of events:/ {n = $5} '
                'END {if (t > 0) printf "%.6f\\n", n / t}',
                ("events_per_sec", "events/s", "higher", "thread yield/lock events per second")),
    "mutex": ('$1 == "total" && $2 == "time:" {sub(/s$/, "", $3); print $3}',
              ("seconds", "s", "lower", "time of a fixed number of mutex locks")),
}  # fmt: skip


def _sysbench(name: str, args: list[str]) -> Rendered:
    if not args:
        raise UserError(f"name a test: {SYSBENCH}")
    _arity(args, 1, SYSBENCH)
    test = _choice(args[0], tuple(SYSBENCHES), "sysbench test", SYSBENCH)
    awk, metric = SYSBENCHES[test]
    timed = "" if test == "mutex" else " --time=5"
    command = f'sysbench "$TEST"{timed} run'
    return _one_figure(name, f"sysbench {test}", command, awk, metric, {"TEST": test})


CYCLICTEST = "cyclictest[:SECONDS]"
# p99 and max from cyclictest's JSON histogram (µs buckets), in the host's python3
CYCLIC_FIGURES = (
    "import json, sys\n"
    't = json.load(open(sys.argv[1]))["thread"]["0"]\n'
    'h = sorted((int(k), n) for k, n in t["histogram"].items())\n'
    "total, seen = sum(n for _, n in h), 0\n"
    "for us, n in h:\n"
    "    seen += n\n"
    "    if seen >= 0.99 * total: break\n"
    'print(us, t["max"], t["avg"])\n'
)


def _cyclictest(name: str, args: list[str]) -> Rendered:
    _arity(args, 1, CYCLICTEST)
    seconds = _number(args[0], "SECONDS", 1, 600, CYCLICTEST) if args else "10"
    description = (
        "cyclictest: wake-up latency of a 1 ms timer thread (p99, max); under TCG, without "
        "KVM, it measures the emulator as much as the kernel"
    )
    body = (
        '\tcyclictest -q -m -t1 -p 80 -i 1000 -D "$SECONDS_EACH" -h 20000 '
        "--json=/tmp/kb-cyclic.json >/dev/null\n"
        f"\tset -- $(python3 -c '{CYCLIC_FIGURES}' /tmp/kb-cyclic.json)\n"
        '\t[ "$#" -eq 3 ] || { echo "kbisect: no figures from cyclictest"; exit 1; }\n'
        '\tkb_metric "$rep" latency_p99 "$1"\n'
        '\tkb_metric "$rep" latency_max "$2"\n'
        '\tkb_metric "$rep" latency_avg "$3"\n'
    )
    metrics = {
        "latency_p99": ("us", "lower", "99th percentile wake-up latency"),
        "latency_max": ("us", "lower", "worst wake-up latency"),
        "latency_avg": ("us", "lower", "mean wake-up latency"),
    }
    return Rendered(
        _manifest(
            name, description, ("cyclictest",), "latency_p99", metrics, {"SECONDS_EACH": seconds}
        ),
        _script(name, body),
    )


def _fio(name: str, args: list[str]) -> Rendered:
    """An imported fio job (testcases.fio_job): its figures for what it does, the first
    direction's bandwidth primary."""
    job = fio_job.read_job(Path(args[0]))
    metrics = {
        f"{d}_{figure}": (unit, better, f"{d} {text}")
        for d in job.directions
        for figure, (unit, better, text) in fio_job.FIGURES.items()
    }
    primary = f"{job.directions[0]}_bw_mbps"
    description = f"fio job {job.file_name} on a raw NVMe disk: {job.directions[0]} bandwidth"
    body = (
        "\tsync\n"
        "\techo 3 > /proc/sys/vm/drop_caches\n"
        f"\tfio --output-format=json --output=/tmp/kb-fio.json /kbisect/{job.file_name}\n"
        f"\tpython3 -c '{fio_job.SUMMARY}' /tmp/kb-fio.json {' '.join(job.directions)} "
        "> /tmp/kb-fio.metrics\n"
        '\twhile read -r metric value; do kb_metric "$rep" "$metric" "$value"; done '
        "< /tmp/kb-fio.metrics\n"
    )
    manifest = _manifest(
        name,
        description,
        ("fio", "python3"),
        primary,
        metrics,
        {},
        timeout=900,
        files=(job.file_name,),
        disks={"data": job.disk_mib},
    )
    prelude = 'export KB_DEV="$KB_DISK_data"   # the job file\'s filename\n'
    return Rendered(manifest, _script(name, body, prelude), files={job.file_name: job.text})


def _iperf3(name: str, args: list[str]) -> Rendered:
    usage = net_throughput.USAGE
    _arity(args, 2, usage)
    protocol = _choice(args[0], net_throughput.PROTOCOLS, "protocol", usage) if args else "tcp"
    way = args[1] if len(args) > 1 else "tx"
    direction = _choice(way, net_throughput.DIRECTIONS, "direction", usage)
    params = {"PROTOCOL": protocol, "DIRECTION": direction, "SECONDS_EACH": "5"}
    sender = "the guest sending" if direction == "tx" else "the guest receiving"
    description = (
        f"iperf3 {protocol.upper()}, {sender}, through QEMU's user-mode network to a client on "
        "the host: without KVM it measures the emulator as much as the kernel"
    )
    metrics = {m: net_throughput.METRICS[m] for m in net_throughput.metrics(protocol, direction)}
    manifest = _manifest(
        name,
        description,
        ("iperf3", "ip", "timeout", "python3"),
        "mbps",
        metrics,
        params,
        peer=net_throughput.PEER,
    )
    script = _script(name, net_throughput.body(), net_throughput.PRELUDE)
    return Rendered(manifest, script)  # its network device is the host userland config's


def _kselftest(name: str, args: list[str]) -> Rendered:
    """A kselftest testcase is built from a kernel tree (testcases.kselftest), not rendered
    from its name alone: `testcase new --from` has no template of it."""
    kselftest.parse(args)
    raise UserError(
        f"{name}: a kselftest testcase is built from a kernel tree at a revision; name it "
        "directly (--testcase kselftest:TARGET[:TEST])"
    )


KINDS = {
    k.name: k
    for k in (
        Kind("stress-ng", STRESS_NG, "a stress-ng stressor's bogo-ops/s", _stress_ng, _stressors),
        Kind("hackbench", HACKBENCH, "rt-tests' hackbench, in seconds", _hackbench),
        Kind("perf-bench", PERF_BENCH, "perf bench: sched, futex, mem", _perf_bench),
        Kind("sysbench", SYSBENCH, "sysbench's cpu, memory, threads and mutex", _sysbench),
        Kind("cyclictest", CYCLICTEST, "rt-tests' cyclictest, latency p99 and max", _cyclictest),
        Kind(net_throughput.KIND, net_throughput.USAGE, "network throughput", _iperf3),
        Kind(kselftest.KIND, kselftest.USAGE, "a kernel selftest, pass/fail", _kselftest),
        Kind(fio_job.KIND, fio_job.USAGE, "your own fio job file, imported", _fio, imported=True),
    )
}


def split(name: str) -> tuple[Kind, list[str]] | None:
    """The kind and arguments of a kind's testcase name; None if `name` names no kind."""
    kind = KINDS.get(name.partition(":")[0])
    if kind is None:
        return None
    if kind.imported:
        raise UserError(
            f"{name}: a {kind.name} testcase is imported from your file, not named: "
            f"'kbisect testcase new NAME --from {kind.usage}', then --testcase NAME"
        )
    m = KIND_NAME_RE.fullmatch(name)
    if m is None:
        raise UnknownTestcaseError(
            f"invalid testcase name {name!r}: {kind.usage}, each argument of letters, digits "
            "and . _ + -"
        )
    return kind, [a for a in m.group(2).split(":") if a]


def render(name: str, as_name: str = "") -> Rendered:
    """The testcase `name` names, called `as_name` if given (`testcase new --from`);
    UserError: an argument the kind does not take."""
    kind_name, _, path = name.partition(":")
    if as_name and kind_name in KINDS and KINDS[kind_name].imported:
        return KINDS[kind_name].render(as_name, [path])
    found = split(name)
    if found is None:
        raise UnknownTestcaseError(f"{name!r} names no testcase kind: {usage()}")
    kind, args = found
    rendered = kind.render(as_name or name, args)
    kind.check(args)
    return rendered


def usage() -> str:
    return "kinds are " + ", ".join(k.usage for k in KINDS.values())


def write(folder: Path, rendered: Rendered) -> None:
    """The testcase folder of a rendering (its files, nothing else)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.toml").write_text(rendered.manifest)
    (folder / "guest.sh").write_text(rendered.script)
    (folder / "config.fragment").write_text(rendered.fragment)
    for file_name, text in rendered.files.items():
        (folder / file_name).write_text(text)


def materialize(name: str, cache: Path, repo: Path | None = None) -> Path:
    """The folder of a kind's testcase under `cache`, rendered once per content (so hosts
    and workers that render it at once, or an upgrade that changes a template, never see
    half a folder): written beside and renamed into place. A kselftest's is built from
    `repo` (testcases.kselftest)."""
    if kselftest.is_kselftest(name):
        split(name)  # its characters checked as any kind's
        return kselftest.materialize(name, cache, repo)
    rendered = render(name)
    text = f"{rendered.manifest}\0{rendered.script}\0{rendered.fragment}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = cache / "testcase-kinds" / f"{slug(name)}-{digest}"
    return publish_folder(folder, lambda partial: write(partial, rendered), "manifest.toml")


def slug(name: str) -> str:
    """A testcase name as a job id and a folder take it: `stress-ng:switch` ->
    `stress-ng-switch` (a folder testcase's name is its own slug); a kselftest's pinned
    revision is left out (`kselftest:timers:<hash>` -> `kselftest-timers`)."""
    if kselftest.is_kselftest(name):
        name = re.sub(r":[0-9a-f]{40}$", "", name)
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
