"""Testcases named by a kind and its parameters, the community's stock benchmarks:
`stress-ng:switch`, `hackbench:pipe:8`, `perf-bench:futex-hash`, `sysbench:cpu`,
`cyclictest`. Each kind is one template that renders a testcase folder (manifest, guest
script, config fragment), the folder `kbisect testcase new NAME --from KIND` writes for a
person to edit; named directly, the folder is rendered into the cache and loaded from
there, on every host alike (a kind's rendering depends only on its name).

They run on the host's userland (the tools come from Debian's packages: stress-ng,
rt-tests, sysbench, linux-perf) and report through kb_metric like any testcase.
"""

import functools
import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.errors import UnknownTestcaseError, UserError
from kbisect.infra.atomic_write import publish_folder
from kbisect.testcases import kselftest

# KIND[:ARG...]: a kind's name, then its arguments, of the characters of a manifest's
# param values less '/' and ':' (they end up in params and in a job's id).
KIND_NAME_RE = re.compile(r"^([a-z0-9][a-z0-9-]{0,31})((?::[A-Za-z0-9_.+-]{1,64}){0,8})$")
FRAGMENT = "# nothing beyond the base config and the host userland's options\n"


@dataclass(frozen=True)
class Rendered:
    """A kind's testcase: the text of its manifest and guest script."""

    manifest: str
    script: str


@dataclass(frozen=True)
class Kind:
    name: str
    usage: str  # "stress-ng:STRESSOR[:WORKERS]"
    description: str
    render: Callable[[str, list[str]], Rendered]  # (testcase name, arguments)
    check: Callable[[list[str]], None] = lambda _: None  # what only a host's tools can tell


def _manifest(
    name: str,
    description: str,
    tool: str,
    primary: str,
    metrics: dict[str, tuple[str, str, str]],
    params: dict[str, str],
    repetitions: int = 3,
    timeout: int = 600,
) -> str:
    """A host-userland manifest; metrics: name -> (unit, better, description)."""
    lines = [
        f"# {description}",
        f"name = {_toml(name)}",
        f"description = {_toml(description)}",
        f"primary = {_toml(primary)}",
        f"repetitions = {repetitions}",
        "warmup = 1               # the first run warms caches (TCG's code cache): not scored",
        f"timeout = {timeout}",
        f'tools = ["{tool}"]',
        'config = "config.fragment"',
        'script = "guest.sh"',
        'userland = "host"        # the tool and its libraries from the host\'s root filesystem',
        "",
        "[params]",
        *(f"{key} = {_toml(value)}" for key, value in params.items()),
    ]
    for metric, (unit, better, text) in metrics.items():
        lines += ["", f"[metrics.{metric}]", f"unit = {_toml(unit)}", f"better = {_toml(better)}"]
        lines.append(f"description = {_toml(text)}")
    return "\n".join(lines) + "\n"


def _toml(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these)."""
    return json.dumps(text)


def _script(name: str, body: str) -> str:
    """A guest script: KB_REPETITIONS runs of `body`, which reports with kb_metric "$rep"."""
    return (
        f"# {name}: runs on the host's root filesystem under `sh -e`, with the kb_* helpers,\n"
        "# the manifest's params and KB_REPETITIONS (warm-up ones included).\n"
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
        name, description, tool, key, {key: (unit, better, text)}, params, repetitions
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
    _arity(args, 2, STRESS_NG)
    stressor = args[0]
    if not STRESSOR_RE.fullmatch(stressor):
        raise UnknownTestcaseError(f"{stressor!r} is no stressor's name: {STRESS_NG}")
    workers = _number(args[1], "WORKERS", 1, 64, STRESS_NG) if len(args) > 1 else "1"
    description = f"stress-ng --{stressor} {workers}: bogo operations per second"
    body = (
        '\tstress-ng --"$STRESSOR" "$WORKERS" --timeout "${SECONDS_EACH}s" --metrics-brief \\\n'
        "\t\t--temp-path /tmp --yaml /tmp/kb-stress.yaml\n"
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
    params = {"STRESSOR": stressor, "WORKERS": workers, "SECONDS_EACH": "5"}
    return Rendered(
        _manifest(name, description, "stress-ng", "ops_per_sec", metrics, params),
        _script(name, body),
    )


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
            name, description, "cyclictest", "latency_p99", metrics, {"SECONDS_EACH": seconds}
        ),
        _script(name, body),
    )


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
        Kind(kselftest.KIND, kselftest.USAGE, "a kernel selftest, pass/fail", _kselftest),
    )
}


def split(name: str) -> tuple[Kind, list[str]] | None:
    """The kind and arguments of a kind's testcase name; None if `name` names no kind."""
    kind = KINDS.get(name.partition(":")[0])
    if kind is None:
        return None
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
    (folder / "config.fragment").write_text(FRAGMENT)


def materialize(name: str, cache: Path, repo: Path | None = None) -> Path:
    """The folder of a kind's testcase under `cache`, rendered once per content (so hosts
    and workers that render it at once, or an upgrade that changes a template, never see
    half a folder): written beside and renamed into place. A kselftest's is built from
    `repo` (testcases.kselftest)."""
    if kselftest.is_kselftest(name):
        split(name)  # its characters checked as any kind's
        return kselftest.materialize(name, cache, repo)
    rendered = render(name)
    digest = hashlib.sha256(f"{rendered.manifest}\0{rendered.script}".encode()).hexdigest()[:16]
    folder = cache / "testcase-kinds" / f"{slug(name)}-{digest}"
    return publish_folder(folder, lambda partial: write(partial, rendered), "manifest.toml")


def slug(name: str) -> str:
    """A testcase name as a job id and a folder take it: `stress-ng:switch` ->
    `stress-ng-switch` (a folder testcase's name is its own slug); a kselftest's pinned
    revision is left out (`kselftest:timers:<hash>` -> `kselftest-timers`)."""
    if kselftest.is_kselftest(name):
        name = re.sub(r":[0-9a-f]{40}$", "", name)
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
