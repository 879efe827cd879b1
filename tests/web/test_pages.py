"""The results pages as text: what a person reads, escaped, folded and filtered."""

from dataclasses import asdict
from datetime import UTC, datetime, timedelta

from temporalio.client import WorkflowExecutionStatus

from kbisect import evidence
from kbisect.contract import Verdict
from kbisect.doors.web import pages
from kbisect.doors.web.html import STAGES, markdown, tone
from kbisect.explain.summary import EXPLAINED, NO_EFFECT, UNEXPLAINED
from kbisect.reports import job_report, sweep_report
from kbisect.reports.answer import answer_of
from kbisect.words import clip
from kbisect.workflows.backport_types import BackportWord
from kbisect.workflows.bisect_types import (
    BadBoot,
    BisectResult,
    EndpointChange,
    JobStatus,
    Progress,
    Step,
    Verification,
    VerificationStatus,
)
from kbisect.workflows.explain_types import AlignmentWord
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepResult, SweepTestcase

BASE = "/kbisect"


def test_a_commit_subject_is_text_never_markup() -> None:
    evil = "<script>alert(1)</script>"
    p = Progress(status="bisecting", testcase="t", metric="x", unit="s", old=["a" * 40])
    p.new, p.steps = "b" * 40, [Step("c" * 40, evil, "bad", "test", value=8.0, boots=2)]
    html = pages.bisect_page(pages.BisectView("bisect-t-1", p, False, "/t"), BASE)
    assert evil not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert markdown(f"| a |\n|---|\n| {evil} |").count("<script>") == 0


def test_the_report_keeps_its_fold_and_nothing_else_of_html() -> None:
    text = "x\n\n<details><summary>the 2 commits</summary>\n\n| a |\n|---|\n| b |\n\n</details>"
    html = markdown(text + "\n\n<img src=x onerror=alert(1)>")
    assert "<details><summary>the 2 commits</summary>" in html and "</details>" in html
    assert "<img" not in html and "&lt;img src=x" in html


# What a commit subject or a guest's console can hold that markdown would act on.
MARKUP = "![p](http://127.0.0.2:9/t.png) $math$ [a link](http://x/) **bold** <b>x</b> | &amp;"


def test_a_report_shows_a_subject_or_a_console_line_as_text_never_as_markdown() -> None:
    """The report's markdown escapes what a repository or a guest wrote: no image that the
    reader's browser would fetch, no link, no emphasis, no cell split."""
    c = "c" * 40
    steps = [Step(c, MARKUP, "bad", "test", value=8.0, boots=1, note=MARKUP)]
    result = BisectResult("found", "regression", "t", "/nonexistent", ["a" * 40], c, c, [c],
                          steps, f"first bad commit: {c} {MARKUP}", subjects={c: MARKUP},
                          notes=[MARKUP], pass_fail=True)  # fmt: skip
    result.bad_boot = BadBoot(c, "panic", f"boot\n```\n{MARKUP}\n````")  # a fence closed
    html = markdown(job_report.markdown(result, "bisect-t-1"))
    for tag in ("<img", "<a ", "<strong>bold", "<b>"):
        assert tag not in html, tag
    shown = MARKUP.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert html.count(shown) >= 5, html  # the answer, a note, the subject, its cell, the log
    assert f"<td>test: {shown}</td>" in html  # the note: one cell, not split at its |
    assert f"```\n{shown}\n````\n</code></pre>" in html  # the console's lines in its block
    tc = SweepTestcase("t", "x", "s", "lower", "fast", 5, 60.0)
    pair = SweepPair("t", "x", "s", 0, 1, PairWord.SAME, boots_old=1, boots_new=1)
    sweep = SweepResult("", ["a" * 40, "b" * 40], ["", ""], [MARKUP, "b"], [tc], [pair], [], 5)
    html = markdown(sweep_report.markdown(sweep))
    assert "<img" not in html and f"<td>{shown} -&gt; b</td>" in html, html
    assert "<img" not in markdown(MARKUP)  # nor would the renderer draw one


def test_a_running_job_polls_its_live_part_and_an_ended_one_does_not() -> None:
    p = Progress(status="bisecting", testcase="t", metric="x", building={"d" * 40: "s"})
    running = pages.bisect_page(pages.BisectView("bisect-t-1", p, False, "/t"), BASE)
    assert "data-url='/kbisect/jobs/bisect-t-1/live'" in running
    assert f"building <code>{'d' * 12}</code>" in running
    done = pages.bisect_page(pages.BisectView("bisect-t-1", p, True, "/t"), BASE)
    assert "data-url=''" in done and "data-done='1'" in done


def test_the_steps_show_what_was_booted_and_count_the_rest() -> None:
    steps = [
        Step("a" * 40, "old", "good", "endpoint", value=512.0, boots=1),
        Step("b" * 40, "same", "good", "same-kernel", same_as="a" * 40),
        Step("c" * 40, "new", "bad", "endpoint", value=8.0, boots=1),
    ]
    html = pages.steps_table(steps, "avg_read_sectors", "sectors")
    assert html.count("<tr>") == 3  # the head and two booted commits
    assert "1 more commits took a verdict with no build or boot" in html
    assert "b" * 12 not in html and "the numbers missing here" in html
    assert [r.split("</td>")[0] for r in html.split("<tr><td>")[1:]] == ["1", "3"]


def test_the_jobs_filter_without_javascript() -> None:
    now = datetime.now(UTC)
    rows = [
        pages.JobRow(
            "bisect-a-1", "bisect", "running", "bisecting", "a", "", now - timedelta(minutes=5)
        ),
        pages.JobRow("sweep-2", "sweep", "completed", "done", "b", "", now - timedelta(hours=2)),
    ]
    html = pages.jobs_page(rows, BASE, "sweep")
    assert "sweep-2" in html and "bisect-a-1" not in html and "1 of 2 jobs" in html
    assert pages.age(now - timedelta(hours=2), now) == "2 h ago"
    # an explain job's id begins as its bisection's: the list goes by its kind
    explain = pages.JobRow("bisect-a-1-explain", "explain", "completed", "", "a", "", now)
    assert ">explain<" in pages.jobs_page([explain], BASE)


def test_a_cancelled_job_says_so_not_its_last_word() -> None:
    now = datetime.now(UTC)
    cancelled = pages.JobRow("sweep-3", "sweep", "canceled", "sweep measuring", "a", "", now)
    html = pages.jobs_page([cancelled], BASE)
    assert ">canceled<" in html and "sweep measuring" not in html


def test_a_series_page_has_its_alerts_and_each_sweep_s_plot() -> None:
    view = pages.SeriesView(
        "cloud",
        "nvme-snapshot-read on apt linux-image-*-cloud-amd64, every 6:00:00",
        ["cloud: 55 -> 56 changed (worse) -12.0% (-15.1% to -8.8%) (sweep sweep-2)"],
        [("sweep-2", "1 of 1 pairs changed"), ("sweep-1", "no change")],
    )
    html = pages.series_page(view, BASE)
    assert "<li>cloud: 55 -&gt; 56 changed (worse)" in html
    assert html.count("<img class='plot'") == 2
    assert html.index("sweep-2") < html.index("sweep-1")  # newest first
    assert "No series watch yet" in pages.series_list_page([], BASE)


def test_a_running_timing_job_shows_its_posterior_as_bars_and_an_ended_one_does_not() -> None:
    steps = [Step("a" * 40, "nvme: pace reads", "bad", "test")]
    p = Progress(status="bisecting", likeliest={"a" * 40: 0.62, "b" * 40: 0.3, "": 0.08},
                 steps=steps)  # fmt: skip
    running = pages.bisect_live(pages.BisectView("bisect-t-1", p, False, "/t"), BASE)
    assert "Which commit is the first bad one" in running
    bars = running.split("<div class='bar'>")[1:]
    assert len(bars) == 3
    assert f"<code>{'a' * 12}</code> nvme: pace reads" in bars[0] and "value='0.6200'" in bars[0]
    assert "62.0%</span>" in bars[0] and "no culprit" in bars[2]
    assert "fixing one" in pages.bisect_live(
        pages.BisectView(
            "x", Progress(status="bisecting", mode="fix", likeliest={"": 1.0}), False, "/t"
        ),
        BASE,
    )
    done = pages.bisect_live(pages.BisectView("bisect-t-1", p, True, "/t"), BASE)
    assert "class='bar'" not in done


def _found(**extra: object) -> BisectResult:
    """The seed's answer: a counter that fell from 512 to 8 sectors, reverted and confirmed."""
    c = "c" * 40
    verified = Verification(
        "revert", c, "b" * 40, "confirmed",
        "reverted on the new endpoint, it behaves like the old endpoint (3 boots, 99.0% sure)",
    )  # fmt: skip
    change = EndpointChange(-0.984375, -0.984375, -0.984375, 2, 2, old=512.0, new=8.0)
    return BisectResult(
        "found", "regression", "nvme-snapshot-read", "/nonexistent", ["a" * 40], "b" * 40, c,
        [c], [], f"first bad commit: {c} NVMe: Allow request merges (99.9% sure; ...)",
        subjects={c: "NVMe: Allow request merges"}, metric="avg_read_sectors", unit="sectors",
        confidence=0.999, change=change, verification=verified, boots=9, **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_answer_is_in_parts_on_the_page_in_the_report_and_in_the_json() -> None:
    result, c = _found(), "c" * 40
    html = pages.answer_card(answer_of(result))
    assert f"first bad commit: <code class='culprit'>{c}</code> (&quot;NVMe: Allow" in html
    assert "<dd>avg_read_sectors 512 → 8 sectors: -98.4% (no noise; 2 boots a side)</dd>" in html
    assert '<span class="badge good">confirmed</span> revert of cccccccccccc: reverted' in html
    assert "<dd>99.9% that every verdict naming this commit is right</dd>" in html
    md = job_report.markdown(result, "bisect-t-1")
    assert f'**found**: first bad commit `{c}` ("NVMe: Allow request merges")' in md
    assert "- verification: **confirmed**, revert of cccccccccccc: reverted" in md
    assert "- boots: 9 boots in all" in md and "## Verification" not in md  # said once
    data = job_report.to_json(result)
    answer = data["answer"]
    assert isinstance(answer, dict) and data["change"] == asdict(result.change)
    assert (answer["commit"], answer["subject"], answer["verification"]) == (
        c, "NVMe: Allow request merges", "confirmed"
    )  # fmt: skip
    assert answer["certainty"] == 0.999 and answer["change"]["old"] == 512.0
    assert answer["named"] == 'cccccccccccc ("NVMe: Allow request merges")'


def test_the_page_folds_the_report_s_tested_commits_and_a_long_subject_ends_in_an_ellipsis() -> (
    None
):
    """The page's steps are the tested commits: its report folds its own table of them (the
    other metrics), which `kbisect report` shows whole. A subject cut to fit says so."""
    long = "nvme: set nomerges on namespace queues to cut submission overhead"
    c = "c" * 40
    result = _found()
    result.steps = [Step(c, long, "bad", "test", value=8.0, boots=1)]
    text = job_report.markdown(result, "bisect-t-1", folded=True)
    assert "<details><summary>the 1 booted, with their other metrics</summary>" in text
    assert "namespace queues to cut submission… |" in text and "ove |" not in text
    assert "<details>" not in job_report.markdown(result, "bisect-t-1")
    html = markdown(text)
    assert "<details><summary>the 1 booted" in html and html.count("</details>") == 2
    assert "<details><summary>the log</summary>\n<pre><code>git bisect start" in html
    p = Progress(status="found", metric="avg_read_sectors", old=["a" * 40], new=c)
    p.steps = result.steps
    assert "cut submission overhead" in pages.steps_table(p.steps, "m", "u")  # 65 < 70 fits
    assert clip(long, 40) == "nvme: set nomerges on namespace queues…" and clip(long, 99) == long


def test_a_noisy_effect_says_its_interval_and_a_contradiction_is_red() -> None:
    noisy = EndpointChange(0.21, 0.12, 0.33, 12, 13, old=57.5, new=69.6)
    result = _found()
    result.change, result.unit, result.metric = noisy, "µs/op", "latency"
    assert result.verification is not None
    result.verification.status = "contradicted"
    a = answer_of(result)
    assert (
        a.effect
        == "latency 57.5 → 69.6 µs/op: +21.0% (95% interval +12.0% to +33.0%; 12 and 13 boots)"
    )
    assert '<span class="badge bad">contradicted</span>' in pages.answer_card(a)


def test_a_noisy_job_shows_its_endpoints_side_by_side_with_intervals() -> None:
    """Old and new in a row each: boots, the level the verdicts compare with its 95%
    interval, the lowest and highest boot; a wild boot set aside is counted, not weighed."""
    old, new = "a" * 40, "c" * 40
    p = Progress(status="found", testcase="t", metric="lat", unit="µs/op", old=[old], new=new)
    p.steps = [
        Step(new, "n", "bad", "endpoint", value=86.0, boots=4, scores=[78.0, 86.0, 90.0, 95.0],
             boot_numbers=[2, 4, 6, 8]),
        Step(old, "o", "good", "endpoint", value=61.0, boots=5,
             scores=[57.0, 60.0, 62.0, 71.0, 400.0], boot_numbers=[1, 3, 5, 7, 9], set_aside=[9]),
    ]  # fmt: skip
    html = pages.endpoints_table(p)
    rows = [r.split("</td><td>") for r in html.split("<tr><td>")[1:]]
    assert [r[0] for r in rows] == ["old", "new"]
    assert rows[0][3] == "4 (+1 set aside)" and rows[0][6].startswith("57 to 71")
    assert rows[1][3] == "4" and rows[1][6].startswith("78 to 95")
    low, high = (float(x) for x in rows[1][5].split(" to "))
    assert low < float(rows[1][4]) < high
    assert "trimmed mean (µs/op)" in html
    p.steps = p.steps[:1]
    assert pages.endpoints_table(p) == ""  # one endpoint booted: nothing side by side
    # a counter: one boot a side, its repetitions agree: no noise, not "too few boots"
    p.steps = [
        Step(old, "o", "good", "endpoint", value=512.0, boots=1, scores=[512.0],
             repetitions=[[512.0, 512.0, 512.0]]),
        Step(new, "n", "bad", "endpoint", value=8.0, boots=1, scores=[8.0], repetitions=[[8.0]]),
    ]  # fmt: skip
    rows = [r.split("</td><td>") for r in pages.endpoints_table(p).split("<tr><td>")[1:]]
    assert [r[5] for r in rows] == ["no noise", "too few boots"]


def test_an_explain_page_folds_what_was_left_out_under_one_line() -> None:
    lines = ["explained: x", "Why:", "  a <b>", "Suggested: y"]
    html = pages.other_live(pages.Words("explained", lines, notes=["note 1", "note <2>"]), True)
    assert "<details><summary>left out of what was read: 2 notes</summary>" in html
    assert "Suggested: y<details>" in html and "note 1<br>note &lt;2&gt;</details>" in html
    assert "a &lt;b&gt;" in html and html.count("<details>") == 1


def test_every_word_a_badge_shows_has_a_colour() -> None:
    words = [
        *JobStatus, *VerificationStatus, *BackportWord, *PairWord, *AlignmentWord, *Verdict,
        *(s.name.lower() for s in WorkflowExecutionStatus), "sweep done", "sweep measuring",
        EXPLAINED, UNEXPLAINED, NO_EFFECT, "planning", "comparing", "tracing",
        *(f"investigation {w}" for w in (*STAGES, "bisect-2", "done", "failed", "refused")),
    ]  # fmt: skip
    assert [w for w in words if not tone(w)] == []
    assert tone("investigation bisect") == "running" and tone("investigation done") == "good"
    assert tone("found") == "good" and tone("does not apply") == "bad"


def test_each_boot_links_its_console_and_each_kernel_its_build_log_and_nothing_else() -> None:
    run, forged = "runs/20261207-101500-0000abcd", "runs/../../etc"
    ok = Step("c" * 40, "s", "good", "test", value=8.0, boots=2, boot_numbers=[3, 7],
              runs=[run, forged], build_log="artifacts/ab12-cd34/build.log")  # fmt: skip
    failed = Step("d" * 40, "s", "skip", "boot-failed", failed_run=run, build_log="/etc/x")
    files = "/kbisect/jobs/j/files"
    html = pages.steps_table([ok, failed], "avg_read_sectors", "sectors", files)
    assert f"title='boot 3: its console' href='{files}/{run}/console.log'>3</a>" in html
    assert f"href='{files}/artifacts/ab12-cd34/build.log'>build log</a>" in html
    assert f"href='{files}/{run}/console.log'>console</a>" in html  # the failed boot's
    assert "etc" not in html and ">7</a>" not in html  # a name no run has is no link
    assert "boots&#x27; files" in html
    assert evidence.files_of([ok, failed]) == {
        f"{run}/console.log", f"{run}/results.log", "artifacts/ab12-cd34/build.log"
    }  # fmt: skip


def test_the_list_puts_each_job_s_stages_under_it_and_cuts_long_ids() -> None:
    now, inv = datetime.now(UTC), "inv-nvme-snapshot-read-1a2b3c4d"

    def row(job: str, kind: str, minutes: int) -> pages.JobRow:
        return pages.JobRow(
            job, kind, "completed", "done", "t", "", now - timedelta(minutes=minutes)
        )

    rows = [  # newest first, as the server lists them
        row("bisect-other-9", "bisect", 1),
        row(f"{inv}-bisect-explain", "explain", 2),
        row(f"{inv}-bisect", "bisect", 20),
        row(f"{inv}-check", "bisect", 30),
        row(inv, "investigation", 31),
        row("sweep-2", "sweep", 40),
    ]
    order = [r.id for r in pages.grouped(rows)]
    assert order == [
        "bisect-other-9", inv, f"{inv}-check", f"{inv}-bisect", f"{inv}-bisect-explain",
        "sweep-2",
    ]  # fmt: skip
    html = pages.jobs_page(rows, BASE)
    assert f"title='{inv}-bisect-explain' href='/kbisect/jobs/{inv}-bisect-explain'" in html
    assert ">↳ explain</a>" in html and ">↳ bisect-explain</a>" not in html  # the nearest
    assert f"class='hash job' title='{inv}'" in html
    # a long summary is one line cut to fit, whole on hover: a row a job
    rows[0].summary = "bisect nvme-snapshot-read (regression) " + "a" * 12 + ".." + "b" * 12
    html = pages.jobs_page(rows, BASE)
    assert f"<span class='what' title='{rows[0].summary}'>{rows[0].summary}</span>" in html
    assert ".what { display: inline-block; max-width: 25rem; overflow: hidden;" in html
