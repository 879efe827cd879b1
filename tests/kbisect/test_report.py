"""The report's bisect log is what `git bisect replay` accepts, and names the same commit."""

import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from kbisect.reports.job_report import bisect_log, markdown, to_json
from kbisect.testcases.blocktrace import DiskTrace, Latency
from kbisect.workflows.bisect_types import BadBoot, BisectResult, Step, Verification


def _repo(path: Path, n: int) -> list[str]:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    hashes = []
    for i in range(n):
        (path / "f").write_text(f"{i}\n")
        subprocess.run(["git", "-C", str(path), "add", "f"], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(path),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                f"change {i}",
            ],
            check=True,
        )
        hashes.append(
            subprocess.run(
                ["git", "-C", str(path), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    return hashes


def _result(h: list[str], mode: str, culprit: int, tested: list[tuple[int, str]]) -> BisectResult:
    steps = [
        Step(commit=h[i], subject=f"change {i}", verdict=v, source="test", value=1.0)
        for i, v in tested
    ]
    return BisectResult(
        status="found",
        mode=mode,
        testcase="t",
        repo="",
        old=[h[0]],
        new=h[-1],
        culprit=h[culprit],
        candidates=[h[culprit]],
        steps=steps,
        message="m",
        subjects={h[culprit]: f"change {culprit}"},
    )


@pytest.mark.parametrize(
    ("mode", "words", "first"),
    [
        ("regression", ("good", "bad"), "is the first bad commit"),
        ("fix", ("bad", "good"), "is the first fixed commit"),
    ],
)
def test_git_bisect_replay_accepts_the_log(
    tmp_path: Path, mode: str, words: tuple[str, str], first: str
) -> None:
    h = _repo(tmp_path / "r", 9)
    old_word, new_word = words
    tested = [(0, old_word), (8, new_word), (4, old_word), (6, new_word), (5, new_word)]
    result = _result(h, mode, 5, tested)
    log = tmp_path / "bisect.log"
    log.write_text(bisect_log(result))
    out = subprocess.run(
        ["git", "-C", str(tmp_path / "r"), "bisect", "replay", str(log)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert f"{h[5]} {first}" in out.stdout


def test_markdown_and_json() -> None:
    h = [f"{i:040x}" for i in range(4)]
    result = _result(h, "regression", 2, [(0, "good"), (3, "bad"), (2, "bad"), (1, "skip")])
    md = markdown(result, "job-1")
    assert "## The commit that caused it" in md and h[2] in md
    assert md.count("| `") == 4 and "git bisect skip " + h[1] in md
    data = to_json(result)
    assert data["culprit"] == h[2] and data["candidates"] == []
    assert [s["verdict"] for s in data["steps"]] == ["good", "bad", "bad", "skip"]  # type: ignore[index]


def _traced(q2c_ms: float, sectors: int) -> dict[str, object]:
    data = DiskTrace("data", "nvme0n1", {"q2c": Latency(q2c_ms), "d2c": Latency(1.0)})
    data.requests, data.sectors = 100, {sectors: 100}
    return {"disks": {"data": data.to_json()}, "folder": f"/runs/{q2c_ms}"}


@pytest.mark.parametrize(
    ("mode", "bad_q2c", "bad_sectors", "above"),
    [
        ("regression", 4.2, 330, True),  # the block layer held up: the time is lost above it
        ("regression", 9.0, 340, False),  # the queue got slower
        ("regression", 4.0, 8, False),  # requests stopped merging
        ("fix", 4.0, 340, True),  # in fix mode the old endpoint is the bad one
        ("fix", 9.0, 340, False),
    ],
)
def test_report_says_when_the_block_layer_is_not_where_the_time_went(
    mode: str, bad_q2c: float, bad_sectors: int, above: bool
) -> None:
    h = [f"{i:040x}" for i in range(4)]
    result = _result(h, mode, 2, [(0, "good"), (3, "bad")])
    good, bad = _traced(4.0, 340), _traced(bad_q2c, bad_sectors)
    if mode == "fix":
        good, bad = bad, good
    result.diagnostics = {h[0]: good, h[3]: bad, h[2]: _traced(4.1, 340)}
    result.metric, result.boots = "read_lat_p99", 10
    result.verification = Verification("revert", h[2], h[3], "confirmed", "m", boots=3)
    md = markdown(result, "job-1")
    assert "10 boots to bisect, 3 to verify, 3 traced: 16 in all" in md
    assert "- old -> new endpoint, data: D2C unchanged (1 ms)" in md
    assert f"Traces of `{h[3][:12]}`: `/runs/" in md
    assert ("happens above it" in md) is above


def _colour_pixels(png: Path, rgb: tuple[float, float, float]) -> int:
    import matplotlib.image

    pixels = matplotlib.image.imread(png)[:, :, :3]
    close = (abs(pixels - rgb) < 0.02).all(axis=2)
    return int(close.sum())


def test_plot_draws_each_verdict_in_its_colour(tmp_path: Path) -> None:
    from matplotlib.colors import to_rgb

    from kbisect.reports.plot import COLOURS, plot_data, plot_scores

    h = [f"{i:040x}" for i in range(4)]
    result = _result(h, "regression", 2, [(0, "good"), (3, "bad"), (2, "bad"), (1, "skip")])
    places = ((0, 512.0), (3, 8.0), (2, 8.0), (1, 300.0))
    for step, (index, value) in zip(result.steps, places, strict=True):
        step.index, step.value = index, value
    data = plot_data(result)
    assert [(p.x, p.y, p.label) for p in data.points] == [
        (0, 512.0, "good"),
        (3, 8.0, "bad"),
        (2, 8.0, "bad"),
        (1, 300.0, "skip"),
    ]
    assert data.culprit_x == 2 and data.star is None and data.spreads == []
    result.steps[0].scores = [500.0, 512.0, 530.0]  # a noisy commit: its spread drawn too
    assert plot_data(result).spreads == [(0, 500.0, 530.0, COLOURS["good"])]
    out = plot_scores(result, tmp_path / "p.png")
    for verdict in ("good", "bad", "skip"):
        assert _colour_pixels(out, to_rgb(COLOURS[verdict])) > 20, verdict
    # Nothing tested: no points and no culprit line, so no red at all.
    result.steps, result.culprit = [], None
    empty = plot_scores(result, tmp_path / "empty.png")
    assert _colour_pixels(empty, to_rgb(COLOURS["bad"])) == 0


def _pass_fail_result(h: list[str]) -> BisectResult:
    result = _result(h, "regression", 2, [(0, "good"), (3, "bad"), (2, "bad"), (1, "good")])
    for step, (index, scores) in zip(
        result.steps, ((0, [1.0]), (3, [0.0]), (2, [0.0, 0.0]), (1, [1.0, 1.0, 0.0])), strict=True
    ):
        step.index, step.scores = index, scores
    result.pass_fail, result.boots = True, 7
    result.bad_boot = BadBoot(h[2], "panic", "Kernel panic - not syncing: init: lab\nKernel Offset")
    return result


def test_a_pass_fail_report_shows_the_bad_boot_and_counts_not_a_metric() -> None:
    h = [f"{i:040x}" for i in range(4)]
    md = markdown(_pass_fail_result(h), "job-1")
    assert f"## The bad boot (panic, `{h[2][:12]}`)" in md
    assert "```\nKernel panic - not syncing: init: lab\nKernel Offset\n```" in md
    assert "| boots passed / failed |" in md and "difference in" not in md
    assert f"| `{h[2][:12]}` | change 2 | bad | 0 / 2 |" in md
    assert f"| `{h[1][:12]}` | change 1 | good | 2 / 1 |" in md
    bad = to_json(_pass_fail_result(h))["bad_boot"]
    assert bad == {"commit": h[2], "bad": "panic", "excerpt": md.split("```\n")[1].rstrip("\n")}


def test_a_pass_fail_plot_stacks_passed_and_failed_boots(tmp_path: Path) -> None:
    from matplotlib.colors import to_rgb

    from kbisect.reports.plot import COLOURS, pass_fail_bars, plot_scores

    h = [f"{i:040x}" for i in range(4)]
    result = _pass_fail_result(h)
    bars = [(b.x, b.passed, b.failed) for b in pass_fail_bars(result)]
    assert bars == [(0, 1, 0), (3, 0, 1), (2, 0, 2), (1, 2, 1)]
    out = plot_scores(result, tmp_path / "pf.png")
    assert _colour_pixels(out, to_rgb(COLOURS["good"])) > 200
    assert _colour_pixels(out, to_rgb(COLOURS["bad"])) > 200
    for step in result.steps:  # every boot passed: no red bar (the culprit's line aside)
        step.scores = [1.0] * len(step.scores)
    result.culprit = None
    assert _colour_pixels(plot_scores(result, tmp_path / "g.png"), to_rgb(COLOURS["bad"])) == 0


def test_a_pass_fail_step_line_says_passed_failed_or_how_many_failed() -> None:
    from kbisect.reports.lines import step_line

    one = Step(commit="a" * 40, subject="s", verdict="bad", source="test", value=0.0, scores=[0.0])
    many = Step(
        commit="b" * 40, subject="s", verdict="bad", source="test", value=1.0, scores=[1, 0, 1, 0]
    )
    assert step_line(3, one, "passed") == f"step 3: {'a' * 12} bad (failed)"
    assert step_line(4, many, "passed") == f"step 4: {'b' * 12} bad (2 of 4 boots failed)"
    assert step_line(5, one, "throughput") == f"step 5: {'a' * 12} bad throughput=0"


def test_the_report_says_which_host_ran_which_boot_when_there_were_several() -> None:
    h = [f"{i:040x}" for i in range(4)]
    result = _result(h, "regression", 2, [(0, "good"), (3, "bad"), (2, "bad")])
    result.steps[0].hosts = ["vm-a", "vm-a"]
    result.steps[1].hosts = ["vm-a", "vm-b", "vm-b"]
    result.steps[2].hosts = ["vm-b"]
    md = markdown(result, "job-1")
    assert "booted on vm-a (1), vm-b (2) |" in md and "booted on vm-a (2) |" in md
    assert to_json(result)["steps"][1]["hosts"] == ["vm-a", "vm-b", "vm-b"]  # type: ignore[index]
    for s in result.steps:  # one host: nothing to tell apart
        s.hosts = ["vm-a"] * len(s.hosts)
    assert "booted on" not in markdown(result, "job-1")


def test_commits_that_share_a_tested_kernel_are_a_count_and_a_folded_list() -> None:
    """A lab's fillers take their parent's verdict: the table shows what was booted; the
    rest is a count, each with the judged commit whose verdict it took, or where its
    never-booted kernel's commit lies, numbered in the order of decision; the SRU draft
    counts kernels booted, not commits."""
    from kbisect.reports.sru_risk import booted_kernels

    h = [str(i) * 40 for i in range(6)]
    result = _result(h, "regression", 4, [(0, "good"), (5, "bad"), (4, "bad")])
    for booted in result.steps:
        booted.boots = 1
    why = "touches no file the config compiles: "
    never = f"the kernel of {h[3][:12]}, never booted, an ancestor of {h[0][:12]}"
    result.steps += [
        Step(
            h[1],
            "change 1",
            "good",
            "same-kernel",
            note=f"{why}the verdict of {h[0][:12]}",
            same_as=h[0],
        ),
        Step(h[2], "change 2", "good", "same-kernel", note=why + never),
    ]
    md = markdown(result, "job-1")
    table = md.split("## Tested commits", 1)[1].split("2 more commits", 1)[0]
    assert table.count("| `") == 3 and h[2][:12] not in table, table
    assert "#: the order in which the verdicts were reached" in table
    folded = md.split("<details>", 1)[1].split("</details>", 1)[0]
    assert f"| 4 | `{h[1][:12]}` | change 1 | good | `{h[0][:12]}` |" in folded, folded
    assert f"| 5 | `{h[2][:12]}` | change 2 | good | {never} |" in folded, folded
    assert "touches no file the config compiles |" in folded
    assert booted_kernels(result) == "3 kernels (2 more commits share one of their kernels)"


def test_the_plot_names_its_commits_by_hash_and_the_culprit_in_its_title(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbisect.reports import plot

    h = [str(i) * 40 for i in range(1, 5)]
    result = _result(h, "regression", 2, [(0, "good"), (3, "bad"), (2, "bad"), (1, "good")])
    for step, index in zip(result.steps, (-1, 2, 1, 0), strict=True):
        step.index = index
    result.verification = Verification(
        kind="revert", change=h[2], onto=h[3], status="confirmed", message="", value=1.0
    )
    drawn: list[object] = []
    monkeypatch.setattr(plot, "save", lambda fig, out: drawn.append(fig) or out)
    plot.plot_scores(result, tmp_path / "p.png")
    ax = drawn[0].axes[0]  # type: ignore[attr-defined]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [h[0][:7], h[1][:7], h[2][:7], h[3][:7], f"revert {h[2][:7]}"]
    assert ax.get_title() == f"t: first bad commit {h[2][:12]} change 2"
    assert f"{h[2][:12]} reverted on new: confirmed" in ax.get_legend_handles_labels()[1]


def test_a_subject_with_dollars_is_text_in_the_plot_title(tmp_path: Path) -> None:
    """matplotlib reads $...$ as maths: a subject such as "tools: $$ and $$" failed."""
    from kbisect.reports.plot import plot_scores

    h = [str(i) * 40 for i in range(1, 4)]
    result = _result(h, "regression", 1, [(0, "good"), (2, "bad"), (1, "bad")])
    result.subjects[h[1]] = "tools: $$ and $x^^b$ ${CC}"
    assert plot_scores(result, tmp_path / "p.svg").read_bytes().startswith(b"<?xml")


def test_a_summary_fits_temporal_s_limit_as_json() -> None:
    import json

    from kbisect.contract import SUMMARY_BYTES, fit_summary

    assert fit_summary("build abc") == "build abc"
    for text in ("x" * 1000, "é" * 300, "nvme: " + "ü" * 200):
        cut = fit_summary(text)
        assert len(json.dumps(cut)) <= SUMMARY_BYTES and cut.endswith("…"), cut


def test_a_disk_name_the_guest_wrote_is_text_in_the_trace_section() -> None:
    h = [f"{i:040x}" for i in range(4)]
    result = _result(h, "regression", 2, [(0, "good"), (3, "bad")])
    name = "[click](https://evil.example/x)<img/src=x>"
    good, bad = _traced(4.0, 340), _traced(4.1, 340)
    for side in (good, bad):
        disks = side["disks"]
        assert isinstance(disks, dict)
        side["disks"] = {name: {**disks["data"], "disk": name}}
    result.diagnostics = {h[0]: good, h[3]: bad}
    html = MarkdownIt("commonmark").render(markdown(result, "job-1"))
    assert "happens above it" in html and "evil.example/x)" in html
    assert "<a " not in html and "<img" not in html
