"""A hostile explain boot: the kernel under test leaves a 100 MB perf.script of unique
symbols, NaN, infinities, garbage and oversized files among its statistics, and fails
another boot with a megabyte of text. Read from its folder on (in a process of its own,
whose peak RSS is measured), summed over boots, compared and reported: the answer is
bounded, says what was left out, is strict JSON, and fits Temporal's payloads."""

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

from kbisect.cli.explain import show_result
from kbisect.contract import (
    EXPLAIN_BOOTS_TIMING,
    EXPLAIN_CHANGES,
    EXPLAIN_MAX_BOOTS,
    EXPLAIN_NAME_CHARS,
    EXPLAIN_NOTES,
    EXPLAIN_SCRIPT_BYTES,
    EXPLAIN_SOURCE_STATS,
    EXPLAIN_STACKS,
    EXPLAIN_STACKS_CHARS,
    EXPLAIN_STATS_FILE_BYTES,
    TestStatus,
)
from kbisect.errors import TestcaseFailedError
from kbisect.explain.summary import summarise
from kbisect.infra import qemu
from kbisect.model import LEFT_OUT, stats_by_source, top_stacks
from kbisect.reports import explain_report
from kbisect.testcases import proc_stats
from kbisect.workflows.explain_types import ExplainBootResult, ExplainResult

DATA = Path(__file__).parent / "explain_data"
SCRIPT_MB = 100
PEAK_RSS_MB = 500
PAYLOAD_BYTES = 1 << 20  # half of Temporal's 2 MB
HISTORY_BYTES = 50 << 20  # Temporal ends a workflow whose history grows past it
# The reading, as the explain activity does it, in a process of its own: its peak RSS, and
# its result as the Temporal payload it travels as
READER = """
import json, resource, sys
from pathlib import Path
from temporalio.converter import DataConverter
from kbisect.model import Direction, Metric, Score
from kbisect.testcases.explain_run import read_boot

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
metric = Metric("throughput", "MB/s", Direction.HIGHER, 100.0, [100.0, 101.0, 99.0])
score = Score("hostile", "throughput", {"throughput": metric})
boot = read_boot(score, folder, "console.log").result("c" * 40, "throughput", "vm-1")
payload = DataConverter.default.payload_converter.to_payloads([boot])[0]
out.write_bytes(payload.SerializeToString())
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_script(path: Path) -> None:
    """SCRIPT_MB of samples, each with a symbol of its own (longer than a name's cap),
    after a line of 2 MB with no end."""
    with open(path, "w") as f:
        f.write("x" * (2 << 20))
        n = 0
        while f.tell() < SCRIPT_MB << 20:
            f.write(
                "".join(
                    f"fio\n\tffffffff81000000 hostile_{i:09d}_{'y' * 120}\n"
                    "\tffffffff81000001 entry_SYSCALL_64\n\n"
                    for i in range(n, n + 10_000)
                )
            )
            n += 10_000


def hostile_folder(root: Path) -> Path:
    for side, uptime in (("before", "10.00"), ("after", "14.00")):
        (root / side).mkdir(parents=True)
        for f in DATA.glob("host-*.txt"):
            (root / side / f.name[5:-4]).write_text(f.read_text())
        (root / side / "uptime").write_text(uptime + "\n")
        # thousands of statistics of long names, under the file's cap
        (root / side / "meminfo").write_text(
            "".join(f"Hostile{i:05d}{'m' * 100}: {i} kB\n" for i in range(6000))
        )
    after, before = root / "after", root / "before"
    (after / "vmstat").write_text((DATA / "host-vmstat.txt").read_text() + "pgfault nan\n")
    (before / "stat").write_text((DATA / "host-stat.txt").read_text() + "ctxt 12x34\n")
    (after / "interrupts").write_text("CPU0\n" + "  1: 5 hostile\n" * 100_000)  # > 1 MiB
    (root / "perf-stat.csv").write_text("inf,,context-switches,2004008123,100.00,,\n")
    write_script(root / "perf.script")
    return root


def read_in_a_process(folder: Path, tmp_path: Path) -> tuple[ExplainBootResult, int, float]:
    out = tmp_path / "payload"
    done = subprocess.run(
        [sys.executable, "-c", READER, str(folder), str(out)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    payload = Payload.FromString(out.read_bytes())
    [boot] = DataConverter.default.payload_converter.from_payloads([payload], [ExplainBootResult])
    return boot, len(payload.data), json.loads(done.stdout)["peak_rss_mb"]


def failed_boot() -> ExplainBootResult:
    """A boot whose guest gave a megabyte of reasons, over lines, for not running."""
    reason = ("the module did not load\n/close\n" * 40_000)[: 1 << 20]
    console = qemu.RECORD_PREFIX + json.dumps({"event": "harness-failed", "reason": reason})
    _, detail = qemu.classify_run(qemu.parse_records(console), console, True)
    error = str(TestcaseFailedError(f"explain boot: {detail}"))
    return ExplainBootResult("c" * 40, TestStatus.TESTCASE_FAILED, error=error)


def boots(boot: ExplainBootResult, value: float) -> list[ExplainBootResult]:
    """The boot again and again, each with stacks of its own (the sum over boots grows)."""
    return [
        dataclasses.replace(
            boot,
            samples=[value + i, value - i, value],
            stacks={(s if s == LEFT_OUT else f"b{i}{s}"): n for s, n in boot.stacks.items()},
        )
        for i in range(EXPLAIN_BOOTS_TIMING)
    ]


def refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def test_a_hostile_boot_is_read_bounded_and_answered_in_strict_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boot, boot_bytes, peak_mb = read_in_a_process(hostile_folder(tmp_path / "explain"), tmp_path)
    with capsys.disabled():
        print(f"\nhostile boot: peak RSS {peak_mb:.0f} MB, its result {boot_bytes:,} bytes")
    assert peak_mb < PEAK_RSS_MB and boot_bytes < PAYLOAD_BYTES
    folded = (tmp_path / "explain" / "stacks.folded").stat().st_size
    assert folded < PAYLOAD_BYTES and not (tmp_path / "explain" / "perf.script").exists()
    said = "\n".join(boot.notes)
    assert f"perf.script: its first {EXPLAIN_SCRIPT_BYTES >> 20} MiB read" in said
    for source in ("vmstat", "stat", "perf-stat", "interrupts"):
        assert f"{source}: cannot read it" in said, said
    assert "samples left out" in said and "meminfo: statistics past its first" in said
    assert "vmstat" not in boot.stats and boot.stats["diskstats"], boot.stats.keys()

    failed = failed_boot()
    parent, culprit = [*boots(boot, 100.0), failed], [*boots(boot, 150.0), failed]
    s = summarise(parent, culprit, "throughput")
    result = ExplainResult(
        s.status, "/lab", "hostile", "throughput", "MB/s", "higher", "p" * 40, "c" * 40,
        ["parent", "culprit"], effect=s.effect.to_json(), comparison=s.comparison.to_json(),
        why=s.why, boots=EXPLAIN_BOOTS_TIMING, failed=[f"culprit: {failed.error}"],
        stacks=s.stacks, message=s.message, notes=s.notes,
    )  # fmt: skip
    payload = DataConverter.default.payload_converter.to_payloads([result])[0]
    with capsys.disabled():
        print(f"the answer: {len(payload.data):,} bytes")
    assert len(payload.data) < PAYLOAD_BYTES
    assert all(len(side) <= EXPLAIN_STACKS + 1 for side in result.stacks.values())  # and LEFT_OUT
    assert len(result.notes) <= EXPLAIN_NOTES and result.notes[0].startswith("flame graph")

    lines = explain_report.outcome_lines(result)
    assert "Left out:" in lines and all(len(line) < 2 * qemu.DETAIL_CAP for line in lines)
    [failure] = [line for line in lines if line.startswith("failed boot:")]
    assert "the module did not load /close" in failure
    show_result(result, "x-explain", argparse.Namespace(json=True, flame=None))
    answer = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert answer["notes"] == result.notes and answer["comparison"]["read"] > 0


def test_at_every_cap_a_boots_result_and_the_answer_stay_well_under_a_payload() -> None:
    """The worst a guest can fill: every source's statistics with the longest names, the
    stacks to their characters, every listed change and note."""
    sources = (*proc_stats.SOURCES, "perf-stat", "profile", "blktrace")
    names = {
        (s, f"{i:06d}{'n' * 200}"): -1.2345678901234567e19 for s in sources for i in range(999)
    }
    stats = proc_stats.bounded(names, [])
    frames = ";".join(["f" * EXPLAIN_NAME_CHARS] * 8)
    stacks = top_stacks(
        {f"c{i};{frames}": 10**9 + i for i in range(9999)}, EXPLAIN_STACKS, EXPLAIN_STACKS_CHARS
    )
    boot = ExplainBootResult("c" * 40, "ok", [1e300] * 100, stats_by_source(stats), dict(stacks))
    change = {
        "source": "vmstat",
        "name": "n" * EXPLAIN_NAME_CHARS,
        "parent": 1e19,
        "culprit": -1e19,
        "change": -200.123456789,
        "low": -210.123456789,
        "high": -190.123456789,
        "p": 1e-300,
    }
    result = ExplainResult(
        "explained", "/lab", "t", "m", "u", "higher", "p" * 40, "c" * 40, ["a" * 500] * 2,
        comparison={"changes": [change] * EXPLAIN_CHANGES},
        stacks={"parent": dict(stacks), "culprit": dict(stacks)},
        failed=["f" * 2 * qemu.DETAIL_CAP] * 2 * EXPLAIN_MAX_BOOTS,
        notes=["n" * 300] * EXPLAIN_NOTES,
        folders=["/runs/" + "r" * 100] * 2 * EXPLAIN_MAX_BOOTS,
    )  # fmt: skip
    to = DataConverter.default.payload_converter.to_payloads
    boot_bytes, answer_bytes = len(to([boot])[0].data), len(to([result])[0].data)
    print(f"\nat every cap: a boot's result {boot_bytes:,} bytes, the answer {answer_bytes:,}")
    assert len(stats) == len(sources) * EXPLAIN_SOURCE_STATS
    assert boot_bytes < PAYLOAD_BYTES and answer_bytes < PAYLOAD_BYTES
    # a job's boots, each a result in its history: within half of Temporal's 50 MB limit
    assert 2 * EXPLAIN_MAX_BOOTS * boot_bytes + answer_bytes < HISTORY_BYTES // 2


def test_the_docs_state_the_contracts_caps() -> None:
    doc = (Path(__file__).parents[2] / "docs/explain.md").read_text()
    for said in (
        f"(`--boots`, 2 to {EXPLAIN_MAX_BOOTS})",
        f"| `--boots` | {EXPLAIN_MAX_BOOTS} a side |",
        f"| its first {EXPLAIN_SCRIPT_BYTES >> 20} MiB, streamed |",
        f"| {EXPLAIN_NAME_CHARS} characters, one printable line |",
        f"| {EXPLAIN_STATS_FILE_BYTES >> 20} MiB | cannot be read |",
        f"| its first {EXPLAIN_SOURCE_STATS} (the profile",
        f"| the {EXPLAIN_STACKS:,} most sampled, within {EXPLAIN_STACKS_CHARS:,} characters |",
        f"| the {EXPLAIN_CHANGES} largest |",
        f"| {EXPLAIN_NOTES} | counted |",
        f"up to the {EXPLAIN_CHANGES} largest",
    ):
        assert said in doc, said
