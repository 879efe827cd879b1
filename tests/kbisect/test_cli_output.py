"""Piped output is whole plain lines: one event a line, nothing wrapped or cut."""

import pytest

from kbisect.cli.output import EventLines
from kbisect.model import Artifact, Commit, Direction, GuestRun, Metric, Outcome, Score
from kbisect.reports.lines import columns
from kbisect.reports.try_report import TryResult, try_lines
from kbisect.testcases.runner import TestcaseRun
from kbisect.workflows.bisect_types import Progress, StatusChange, Step

LONG = "/a/very/long/path/that/a/terminal/of/eighty/columns/would/wrap/somewhere/in/the/middle"


def _step(commit: str, verdict: str, value: float | None, source: str = "test") -> Step:
    return Step(
        commit=commit, subject=f"subject {commit}", verdict=verdict, source=source, value=value
    )


def test_each_event_is_written_once() -> None:
    lines: list[str] = []
    events = EventLines(lines.append)
    p = Progress(status="calibrating", metric="avg_read_sectors", message="scoring both endpoints")
    events.update(p)
    events.update(p)  # nothing new: nothing written
    p.steps = [_step("a" * 40, "good", 512.0, "endpoint"), _step("b" * 40, "bad", 8.0, "endpoint")]
    p.status, p.message, p.current = "bisecting", "", ["1966bd061a65" + "0" * 28]
    events.update(p)
    p.steps.append(_step("1966bd061a65" + "0" * 28, "bad", 8.0))
    p.steps.append(_step("c" * 40, "skip", None, "build-failed"))
    p.current = []
    events.update(p)
    events.finish(p.steps, p.metric)  # the end: nothing left to write
    assert lines == [
        "calibrating: scoring both endpoints",
        f"step 1: {'a' * 12} good avg_read_sectors=512 (endpoint)",
        f"step 2: {'b' * 12} bad avg_read_sectors=8 (endpoint)",
        "bisecting",
        "testing 1966bd061a65",
        "step 3: 1966bd061a65 bad avg_read_sectors=8",
        f"step 4: {'c' * 12} skip (build-failed)",
    ]


def test_a_status_over_before_the_first_look_is_still_said_in_its_order() -> None:
    """Validation is over in a moment: a follower on a busy host first looked once the job
    was calibrating, and the README's "validating" line was missing."""
    lines: list[str] = []
    events = EventLines(lines.append)
    calibrating = "booting both endpoints until they differ"
    changes = [StatusChange("validating"), StatusChange("calibrating", calibrating)]
    p = Progress(status="calibrating", message=calibrating, changes=list(changes))
    events.update(p)
    p.status, p.message = "bisecting", "x -98.4%"
    p.changes.append(StatusChange("bisecting", "x -98.4%"))
    events.update(p)
    p.message = "x -98.4% (no noise)"  # a message changed within one status: once
    events.update(p)
    events.update(p)
    assert lines == [
        "validating",
        f"calibrating: {calibrating}",
        "bisecting: x -98.4%",
        "bisecting: x -98.4% (no noise)",
    ]


def test_a_plain_table_cuts_nothing() -> None:
    job = "bisect-nvme-snapshot-read-0123abcd" * 3
    text = columns(("JOB", "STATE"), [(job, "running"), ("x", "completed")])
    assert text.splitlines() == [
        "JOB" + " " * (len(job) - 1) + "STATE",
        f"{job}  running",
        "x" + " " * (len(job) + 1) + "completed",
    ]


def test_try_as_plain_lines() -> None:
    score = Score(
        testcase="nvme-snapshot-read",
        primary="avg_read_sectors",
        metrics={
            "avg_read_sectors": Metric(
                "avg_read_sectors", "sectors", Direction("higher"), 8.0, [8.0, 8.0]
            ),
            "wall": Metric("wall", "s", Direction("lower"), 22.5, [22.0, 23.0]),
        },
    )
    console = f"{LONG}/console.log"
    run = GuestRun(Outcome.SUCCESS, records=[], console=console, seconds=31.2, accel="tcg")
    artifact = Artifact("f" * 40, "t", "c", "/k", "/c", f"{LONG}/build.log", cached=True)
    result = TryResult(
        commit=Commit("f" * 40, "nvme: set nomerges"),
        artifact=artifact,
        result=TestcaseRun(run=run, score=score, profile="ebs-gp2", repetitions=2),
    )
    lines = "\n".join(try_lines(result)).splitlines()
    assert lines[0] == f"{'f' * 12} nvme: set nomerges"
    assert lines[1] == "nvme-snapshot-read (ebs-gp2, 2 repetitions)"
    assert lines[3].split() == [
        "avg_read_sectors",
        "(primary)",
        "8",
        "sectors",
        "higher",
        "8",
        "8",
        "-",
    ]  # "-": no warm-up samples
    assert f"build: cache hit; log {LONG}/build.log" in lines
    assert f"guest: success in 31.2s (tcg); console {LONG}/console.log" in lines


def test_try_says_when_the_guest_reached_init_and_its_testcase() -> None:
    from kbisect.reports.try_report import guest_times

    records: list[dict[str, object]] = [
        {"event": "booted", "kernel": "6.1", "uptime": 2.41},
        {"event": "started", "uptime": 3.9},
        {"event": "metric", "rep": 1, "name": "x", "value": 1.0},
    ]
    assert guest_times(records) == {"booted_at": 2.41, "started_at": 3.9}
    assert guest_times([{"event": "booted", "kernel": "6.1"}]) == {}  # an older guest


def test_a_boot_line_follows_its_own_steps_testing_line() -> None:
    """Polls see a boot only once the job has moved on: the commit under test is already
    the next one. The boot line still comes under the step it belongs to."""
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    lines: list[str] = []
    events = EventLines(lines.append)
    p = Progress(status="bisecting", metric="x", current=[a])
    events.update(p)
    p.current, p.boots, p.last_boot = [b], 1, f"{a[:12]} boot 1: x 8"  # a booted, b next
    events.update(p)
    p.boots, p.last_boot = 2, f"{b[:12]} boot 1: x 9"  # b's own boot, still under test
    events.update(p)
    p.current, p.boots, p.last_boot = [c], 3, f"{c[:12]} boot 1: x 7"  # c began and booted
    events.update(p)
    assert lines == [
        "bisecting",
        f"testing {a[:12]}",
        f"boot 1: {a[:12]} boot 1: x 8",
        f"testing {b[:12]}",
        f"boot 2: {b[:12]} boot 1: x 9",
        f"testing {c[:12]}",
        f"boot 3: {c[:12]} boot 1: x 7",
    ]


def test_a_boot_line_comes_before_the_step_it_decided() -> None:
    a, b = "a" * 40, "b" * 40
    lines: list[str] = []
    events = EventLines(lines.append)
    p = Progress(status="bisecting", metric="x", current=[a])
    events.update(p)
    p.steps = [_step(a, "bad", 8.0)]
    p.current, p.boots, p.last_boot = [b], 1, f"{a[:12]} boot 1: x 8"
    events.update(p)
    assert lines[2:] == [
        f"boot 1: {a[:12]} boot 1: x 8",
        f"step 1: {a[:12]} bad x=8",
        f"testing {b[:12]}",
    ]


def test_builds_are_said_as_they_start_and_the_last_status_once() -> None:
    """A cold build takes minutes: the piped lines say what is building. The job's last
    status (found: ...) ends before a poll sees it: end() writes it, once."""
    a, b = "a" * 40, "b" * 40
    lines: list[str] = []
    events = EventLines(lines.append)
    p = Progress(status="calibrating", metric="x", current=[a, b])
    p.building = {a: "nvme: set nomerges", b: ""}
    events.update(p)
    p.building = {b: ""}  # a built, b still building: nothing new to say
    events.update(p)
    events.end("found", "first bad commit: c (99.0% sure)")
    events.end("found", "first bad commit: c (99.0% sure)")
    assert lines == [
        "calibrating",
        f"testing {a[:12]}, {b[:12]}",
        f"building {a[:12]} (nvme: set nomerges)",
        f"building {b[:12]}",
        "found: first bad commit: c (99.0% sure)",
    ]


def test_the_live_view_shows_each_build_with_its_time_so_far(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from rich.console import Console

    from kbisect.cli.output import BuildClock, progress_view

    clock = BuildClock()
    p = Progress(status="calibrating", metric="x", building={"a" * 40: "nvme: set nomerges"})
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    view = progress_view(p, clock)
    now[0] = 100.0 + 151  # the next refresh, with no news from the job
    console = Console(width=120, record=True)
    console.print(view)
    assert f"building {'a' * 12} (nvme: set nomerges) 2:31" in console.export_text()


def test_a_subject_or_a_console_path_is_text_on_a_terminal_never_markup() -> None:
    from rich.console import Console

    from kbisect.cli.output import progress_view
    from kbisect.reports.try_report import render_try

    hostile = "nvme: [/x] [bold]set[/bold] nomerges"
    score = Score("t", "x", {"x": Metric("x", "s", Direction("lower"), 1.0, [1.0])})
    run = GuestRun(
        Outcome.SUCCESS, records=[], console="/runs/[/c]/console.log", seconds=1.0, accel="tcg"
    )
    artifact = Artifact("f" * 40, "t", "c", "/k", "/c", "/b/[/l]/build.log", cached=True)
    result = TryResult(
        commit=Commit("f" * 40, hostile),
        artifact=artifact,
        result=TestcaseRun(run=run, score=score, profile="fast", repetitions=1),
    )
    console = Console(width=200, record=True)
    render_try(result, console)
    p = Progress(status="bisecting", metric="x", steps=[Step("a" * 40, hostile, "bad", "test")])
    console.print(progress_view(p))
    text = console.export_text()
    assert f"{'f' * 12} {hostile}" in text and "/runs/[/c]/console.log" in text
    assert "nvme: [/x] [bold]set[/bold" in text  # the table's cell, cut at 48
