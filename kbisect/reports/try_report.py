"""How `kbisect try` shows its result: a table for people, JSON for scripts."""

from dataclasses import asdict, dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kbisect.builders.patched_commit import Patched
from kbisect.model import Artifact, Commit, Metric
from kbisect.testcases.manifest import PASSED
from kbisect.testcases.runner import TestcaseRun
from kbisect.testcases.trace_run import Diagnostics
from kbisect.words import plural


@dataclass(frozen=True)
class TryResult:
    """What `kbisect try` found (kbisect.jobs.try_pipeline makes it): the kernel, and the
    testcase's run on it."""

    commit: Commit  # a prebuilt kernel's: its package (or file) name and version
    artifact: Artifact
    result: TestcaseRun
    diagnostics: Diagnostics | None = None  # with --trace
    prebuilt: bool = False
    patched: Patched | None = None  # with --patch: the revision and the patches on it


def try_to_json(r: TryResult) -> dict[str, object]:
    run = r.result.run
    return (
        {
            "commit": asdict(r.commit),
            "testcase": r.result.score.testcase,
            "profile": r.result.profile,
            "repetitions": r.result.repetitions,
            "primary": r.result.score.primary,
            "metrics": {
                name: {
                    "value": m.value,
                    "unit": m.unit,
                    "better": m.better.value,
                    "samples": m.samples,
                    "warmup": m.warmup,
                }
                for name, m in r.result.score.metrics.items()
            },
            "build": {
                "prebuilt": r.prebuilt,
                "cached": r.artifact.cached,
                "seconds": r.artifact.seconds,
                "kernel": r.artifact.kernel,
                "log": r.artifact.build_log,
                "modules": list(r.result.run_modules),
            },
            "userland": r.result.userland or "initramfs",
            "run": {
                "outcome": run.outcome.value,
                "seconds": run.seconds,
                "accel": run.accel,
                "console": run.console,
                **guest_times(run.records),
            },
        }
        | ({"diagnostics": r.diagnostics.to_json()} if r.diagnostics else {})
        | ({"patched": _patched_json(r.patched)} if r.patched else {})
        | _verdict_json(r)
    )


def _patched_json(p: Patched) -> dict[str, object]:
    return {
        "base": p.base,
        "patches": [{"source": x.source, "subject": x.subject} for x in p.patches],
    }


def patched_lines(r: TryResult) -> list[str]:
    """What was built: the revision and the patches on it, a line a patch."""
    if r.patched is None:
        return []
    return [f"patched: {r.patched.base[:12]} and {plural(len(r.patched.patches), 'patch')}",
            *(f"  {p.source}" + (f": {p.subject}" if p.subject != p.source else "")
              for p in r.patched.patches)]  # fmt: skip


def _verdict_json(r: TryResult) -> dict[str, object]:
    """A pass/fail testcase's verdict: good, or bad with what made it so."""
    if r.result.score.primary != PASSED:
        return {}
    return {"verdict": {"bad": r.result.bad, "excerpt": r.result.excerpt}}


def verdict_lines(r: TryResult) -> list[str]:
    """A pass/fail testcase's verdict, and a bad boot's console lines."""
    if r.result.score.primary != PASSED:
        return []
    if not r.result.bad:
        return ["verdict: good"]
    return [f"verdict: bad ({r.result.bad})", *(f"  {ln}" for ln in r.result.excerpt.splitlines())]


def guest_times(records: list[dict[str, object]]) -> dict[str, float]:
    """Seconds from the kernel's start to init ("booted") and to the testcase ("started":
    after the userland's set-up), as the guest reported them."""
    times = {}
    for rec in records:
        up = rec.get("uptime")
        if rec.get("event") in ("booted", "started") and isinstance(up, int | float):
            times[f"{rec['event']}_at"] = float(up)
    return times


def _guest_line(r: TryResult) -> str:
    run = r.result.run
    t = guest_times(run.records)
    at = (
        f", init at {t['booted_at']:.1f}s, testcase at {t['started_at']:.1f}s"
        if {"booted_at", "started_at"} <= t.keys()
        else ""
    )
    return (
        f"guest: {run.outcome.value} in {run.seconds:.1f}s ({run.accel}{at}); console {run.console}"
    )


def render_try(r: TryResult, console: Console) -> None:
    score = r.result.score
    console.print(Text.assemble((_name(r), "bold"), " ", r.commit.subject), highlight=False)
    table = Table(
        title=f"{score.testcase} ({r.result.profile}, {plural(r.result.repetitions, 'repetition')})"
    )
    table.add_column("metric")
    table.add_column("median", justify="right")
    table.add_column("unit")
    table.add_column("better")
    table.add_column("samples")
    table.add_column("warm-up (not scored)")
    for name, m in score.metrics.items():
        label = Text.assemble((name, "bold"), " (primary)") if name == score.primary else name
        table.add_row(label, f"{m.value:g}", m.unit, m.better.value, *_samples(m))
    console.print(table)
    # a subject's or a guest's words are text, never rich markup ("[/x]" would raise)
    lines = [*patched_lines(r), _build_line(r), _guest_line(r), *verdict_lines(r), *trace_lines(r)]
    for line in lines:
        console.print(line, highlight=False, markup=False)


def trace_lines(r: TryResult) -> list[str]:
    """The traced boot's figures, a line a disk; where its files are."""
    d = r.diagnostics
    if d is None:
        return []
    lines = [f"trace: {d.folder} (binary traces, btt and blkparse output)"]
    for disk in d.disks:
        lat = ", ".join(
            f"{k.upper()} {v.avg_ms:.3g} ms" + (f" (p99 {v.p99_ms:.3g})" if v.p99_ms else "")
            for k, v in disk.latencies.items()
        )
        lines.append(
            f"  {disk.disk} ({disk.device}): {lat or 'no btt figures'}; {disk.requests} "
            f"requests of {disk.avg_request_sectors:.0f} sectors on average, "
            f"{disk.merges} merges"
        )
    return lines


def _name(r: TryResult) -> str:
    return r.commit.hash if r.prebuilt else r.commit.hash[:12]


def _build_line(r: TryResult) -> str:
    a = r.artifact
    userland = f"; host userland over {r.result.userland}" if r.result.userland else ""
    if r.prebuilt:
        fetched = "cached" if a.cached else f"fetched in {a.seconds:.0f}s"
        mods = ", ".join(r.result.run_modules) or "none needed"
        return f"kernel: prebuilt {a.kernel} ({fetched}); modules loaded: {mods}{userland}"
    build = "cache hit" if a.cached else f"built in {a.seconds:.0f}s"
    return f"build: {build}; log {a.build_log}{userland}"


def _samples(m: Metric) -> tuple[str, str]:
    return " ".join(f"{v:g}" for v in m.samples), " ".join(f"{v:g}" for v in m.warmup) or "-"


def try_lines(r: TryResult) -> list[str]:
    """The same as plain lines, for a pipe or a log file: nothing wrapped or cut."""
    from kbisect.reports.lines import columns

    score = r.result.score
    rows = [
        (
            f"{name} (primary)" if name == score.primary else name,
            f"{m.value:g}",
            m.unit,
            m.better.value,
            *_samples(m),
        )
        for name, m in score.metrics.items()
    ]
    return [
        f"{_name(r)} {r.commit.subject}",
        f"{score.testcase} ({r.result.profile}, {plural(r.result.repetitions, 'repetition')})",
        columns(("METRIC", "MEDIAN", "UNIT", "BETTER", "SAMPLES", "WARM-UP"), rows),
        *patched_lines(r),
        _build_line(r),
        _guest_line(r),
        *verdict_lines(r),
        *trace_lines(r),
    ]
