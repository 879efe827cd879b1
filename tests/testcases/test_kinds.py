"""Testcases named by a kind (`stress-ng:switch`): rendered, loaded, and their guest scripts
read their tools' real output formats (the tools stubbed by what they print)."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

from kbisect.errors import UnknownTestcaseError, UserError
from kbisect.testcases import kinds, manifest

# What each tool printed on this project's hosts (stress-ng 0.15.06, rt-tests 2.4,
# sysbench 1.0.20, perf 6.1), trimmed to the lines the scripts read and their neighbours.
OUTPUTS = {
    "stress-ng": (
        "metrics:\n    - stressor: switch\n      bogo-ops: 565648\n"
        "      bogo-ops-per-second-usr-sys-time: 293498.389684\n"
        "      bogo-ops-per-second-real-time: 282778.053582\n"
        "      wall-clock-time: 2.000325\n"
    ),
    "hackbench": "Running in process mode with 2 groups\nTime: 0.033\n",
    "perf sched messaging": "# 20 sender and receiver processes per group\n\n"
    "     Total time: 0.132 [sec]\n",
    "perf sched pipe": "     Total time: 0.682 [sec]\n\n      34.093500 usecs/op\n"
    "          29331 ops/sec\n",
    "perf futex hash": "Averaged 3067904 operations/sec (+- 2.87%), total secs = 1\n",
    "perf mem memcpy": "# Copying 64MB bytes ...\n\n      37.202381 GB/sec\n",
    "sysbench cpu": "CPU speed:\n    events per second:  5001.44\n\nGeneral statistics:\n"
    "    total time:                          5.0001s\n"
    "    total number of events:              25006\n",
    "sysbench memory": "5619.00 MiB transferred (5614.32 MiB/sec)\n",
    "sysbench threads": "General statistics:\n    total time:                          5.0003s\n"
    "    total number of events:              8070\n",
    "sysbench mutex": "General statistics:\n    total time:                          0.1810s\n",
}
CYCLIC_JSON = (
    '{"thread": {"0": {"histogram": {"20": 90, "25": 9, "400": 1}, "cycles": 100,'
    ' "min": 20, "max": 400, "avg": 24.6}}}'
)
EXPECTED = {
    "stress-ng:switch": {"ops_per_sec": 282778.053582, "ops_per_cpu_sec": 293498.389684},
    "hackbench:pipe:2": {"seconds": 0.033},
    "perf-bench:sched-messaging": {"seconds": 0.132},
    "perf-bench:sched-pipe": {"usecs_per_op": 34.0935},
    "perf-bench:futex-hash": {"ops_per_sec": 3067904.0},
    "perf-bench:mem-memcpy": {"gb_per_sec": 37.202381},
    "sysbench:cpu": {"events_per_sec": 5001.44},
    "sysbench:memory": {"mib_per_sec": 5614.32},
    "sysbench:threads": {"events_per_sec": 8070 / 5.0003},
    "sysbench:mutex": {"seconds": 0.181},
    "cyclictest": {"latency_p99": 25.0, "latency_max": 400.0, "latency_avg": 24.6},
}

STUB = """#!/bin/sh
# the tool, as its output: stress-ng writes its YAML where --yaml says
case "$0" in
*stress-ng)
    while [ "$#" -gt 0 ]; do [ "$1" = --yaml ] && cat "{dir}/stress-ng" > "$2"; shift; done ;;
*cyclictest)
    for a; do case "$a" in --json=*) cat "{dir}/cyclic.json" > "${{a#--json=}}";; esac; done ;;
*perf) cat "{dir}/perf $2 $3" ;;
*sysbench) cat "{dir}/sysbench $1" ;;
*) cat "{dir}/$(basename "$0")" ;;
esac
"""


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    """A PATH folder of the tools, each printing what the real one printed."""
    out, bin_ = tmp_path / "out", tmp_path / "bin"
    out.mkdir()
    bin_.mkdir()
    for name, text in OUTPUTS.items():
        (out / name).write_text(text)
    (out / "cyclic.json").write_text(CYCLIC_JSON)
    for tool in ("stress-ng", "hackbench", "perf", "sysbench", "cyclictest"):
        path = bin_ / tool
        path.write_text(STUB.format(dir=out))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_


def _run(name: str, stubs: Path, tmp_path: Path) -> dict[str, float]:
    """The guest script of `name`, one repetition, on the stubbed tools: its metrics."""
    m = manifest.load(name)
    helpers = 'kb_metric() { echo "METRIC $2 $3"; }\n'
    script = tmp_path / "guest.sh"
    script.write_text(helpers + m.script.decode().replace("/tmp/", f"{tmp_path}/"))
    env = {**os.environ, **m.params, "KB_REPETITIONS": "1"}
    env["PATH"] = f"{stubs}:{env['PATH']}"
    out = subprocess.run(["sh", "-e", str(script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return {
        line.split()[1]: float(line.split()[2])
        for line in out.stdout.splitlines()
        if line.startswith("METRIC ")
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_kind_s_script_reads_its_tool_s_figures(
    name: str, stubs: Path, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kinds, "_host_stressors", lambda: frozenset({"switch", "hdd"}))
    got = _run(name, stubs, tmp_path)
    assert got == pytest.approx(EXPECTED[name], rel=1e-6)
    m = manifest.load(name)
    assert m.name == name and m.primary in got and m.userland == "host"
    assert set(m.metrics) == set(got)


def test_a_kind_s_testcase_loads_as_the_library_s_do(cache: Path) -> None:
    m = manifest.load("hackbench:pipe:8")
    assert (m.primary, m.tools, m.params["GROUPS"], m.params["MODE"]) == (
        "seconds",
        ["hackbench"],
        "8",
        "pipe",
    )
    assert m.metrics["seconds"].better == "lower" and m.warmup == 1
    again = manifest.find("hackbench:pipe:8")
    assert again == m.folder and m.folder.is_relative_to(cache)  # rendered once
    assert manifest.load("hackbench").params == {"MODE": "socket", "GROUPS": "4", "LOOPS": "200"}


@pytest.mark.parametrize(
    ("name", "error", "says"),
    [
        ("stress-ng", UserError, "name a stressor"),
        ("stress-ng:nosuch", UnknownTestcaseError, "stress-ng --stressors"),
        ("stress-ng:switch:0", UserError, "WORKERS must be a whole number from 1 to 64"),
        ("hackbench:tcp", UnknownTestcaseError, "one of pipe, socket"),
        ("hackbench:pipe:2:3", UserError, "too many arguments"),
        ("perf-bench:numa", UnknownTestcaseError, "sched-messaging"),
        ("sysbench", UserError, "sysbench:cpu|memory|threads|mutex"),
        ("cyclictest:9999", UserError, "SECONDS must be"),
        ("nosuch:x", UnknownTestcaseError, "kinds are stress-ng:STRESSOR"),
        ("stress-ng:a;b", UnknownTestcaseError, "invalid testcase name"),
        ("stress-ng:$(id)", UnknownTestcaseError, "invalid testcase name"),
        ("stress-ng:switch\n", UnknownTestcaseError, "invalid testcase name"),  # $ before \n
    ],
)
def test_a_kind_s_bad_arguments_are_one_line(
    name: str,
    error: type[Exception],
    says: str,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kinds, "_host_stressors", lambda: frozenset({"switch"}))
    with pytest.raises(error) as info:
        manifest.load(name)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_without_stress_ng_a_host_leaves_the_stressor_to_the_vm_hosts(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kinds, "_host_stressors", lambda: None)  # a build host
    assert manifest.load("stress-ng:anything").params["STRESSOR"] == "anything"


def test_a_library_folder_wins_over_a_bare_kind(cache: Path, tmp_path: Path) -> None:
    assert manifest.find("sched-pipe").name == "sched-pipe"  # a folder, not perf-bench's
    assert kinds.split("sched-pipe") is None and kinds.split("cyclictest") is not None


def test_a_kind_s_name_as_a_job_id_and_a_folder() -> None:
    assert kinds.slug("stress-ng:switch") == "stress-ng-switch"
    assert kinds.slug("hackbench:pipe:8") == "hackbench-pipe-8"
    assert kinds.slug("sched-pipe,boots") == "sched-pipe-boots"


def test_memcpy_under_an_emulator_reads_mb_per_sec_as_gb(
    stubs: Path, tmp_path: Path, cache: Path
) -> None:
    # Under TCG glibc's memcpy runs at some hundred MB/s: perf then prints MB/sec.
    (tmp_path / "out" / "perf mem memcpy").write_text(
        "# Copying 64MB bytes ...\n\n 613.75 MB/sec\n"
    )
    assert _run("perf-bench:mem-memcpy", stubs, tmp_path) == {"gb_per_sec": 0.61375}


def test_an_io_stressor_runs_on_ext4_on_its_own_disk_with_its_hdd_opts(
    stubs: Path, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kinds, "_host_stressors", lambda: frozenset({"switch", "hdd"}))
    m = manifest.load("stress-ng:hdd:2:direct+rd-seq")
    assert [(d.name, d.size_mib) for d in m.disks] == [("data", kinds.IO_DISK_MIB)]
    assert m.tools == ["stress-ng", "mkfs.ext4"] and "CONFIG_EXT4_FS=y" in m.config_fragment
    assert m.params["HDD_OPTS"] == "direct+rd-seq"
    calls = tmp_path / "calls"
    for tool in ("mkfs.ext4", "mount"):  # each says what it was asked
        (stubs / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n')
        (stubs / tool).chmod(0o755)
    stress = (stubs / "stress-ng").read_text()
    (stubs / "stress-ng").write_text(
        stress.replace("#!/bin/sh\n", f'#!/bin/sh\necho "$0 $*" >> {calls}\n')
    )
    monkeypatch.setenv("KB_DISK_data", "/dev/nvme0n1")
    assert _run("stress-ng:hdd:2:direct+rd-seq", stubs, tmp_path)["ops_per_sec"] > 0
    said = calls.read_text()
    assert f"mount -t ext4 /dev/nvme0n1 {tmp_path}/kb-io" in said
    assert (
        "mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 /dev/nvme0n1" in said
    )
    assert "--hdd 2 " in said and "--hdd-opts direct,rd-seq" in said
    assert f"--temp-path {tmp_path}/kb-io" in said
    switch = manifest.load("stress-ng:switch")  # a CPU stressor: no disk, no file system
    assert switch.disks == [] and "EXT4" not in switch.config_fragment
    with pytest.raises(UnknownTestcaseError, match="unknown --hdd-opts 'o-direct'"):
        manifest.load("stress-ng:hdd:1:o-direct")
    with pytest.raises(UserError, match="too many arguments"):
        manifest.load("stress-ng:switch:1:direct")
