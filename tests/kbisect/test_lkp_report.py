"""An LKP report in (issue 71, item 1): a mail in the kernel test robot's layout read into a
bisection's fields, each with the lines it came from; malformed and hostile mails one line
each; `kbisect bisect --from-report MAIL --dry-run` prints and starts nothing. The mails
here are written for these tests in LKP's layout (hashes and figures made up)."""

import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kbisect.builders.trees import Tree
from kbisect.errors import UserError
from kbisect.jobs import investigation
from kbisect.jobs.request import JobOptions
from kbisect.main import main
from kbisect.reports import lkp_report
from kbisect.reports.lkp_report import inverted_pct, mail_text, parse, with_tree
from kbisect.testcases import kinds

COMMIT = "1234abcd5678901234567890abcdef1234567890"
BASE_SHORT, BASE_LONG = "abcdef0123", "abcdef0123456789"
KERNEL_ORG = "https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git"


def report(
    test: str = "hackbench",
    metric: str = "hackbench.throughput",
    change: str = "-10.2%",
    params: tuple[str, ...] = ("nr_threads: 800%", "iterations: 4", "mode: process", "ipc: pipe"),
    headline: str = "",
    base: str = BASE_SHORT,
    header_base: str = BASE_LONG,
    commit_line: str = f'commit: {COMMIT} ("sched/fair: wake the waker\'s sibling")',
    row: str = "",
    word: str = "regression",
) -> str:
    """A report in LKP's layout: subject, headline, commit and repository, testcase and
    parameters, then the comparison (the base, the commit, the metric's row)."""
    row = row or f"     12345 ±  2%     {change}      11089        {metric}"
    headline = headline or f"kernel test robot noticed a {change} {word} of {metric} on:"
    lines = [
        f"Subject: [linus:master] [sched/fair]  {COMMIT[:10]}: {metric} {change} {word}",
        "",
        "Hello,",
        "",
        headline,
        "",
        "",
        commit_line,
        f"{KERNEL_ORG} master",
        "",
        f"testcase: {test}",
        "config: x86_64-rhel-9.4",
        "compiler: gcc-12",
        "test machine: 64 threads 2 sockets (Ice Lake) with 256G memory",
        "parameters:",
        "",
        *(f"\t{p}" for p in params),
        "\tcpufreq_governor: performance",
        "",
        "",
        "Details are as below:",
        "-" * 98 + ">",
        "",
        "=" * 89,
        "compiler/cpufreq_governor/kconfig/rootfs/tbox_group/testcase:",
        f"  gcc-12/performance/x86_64-rhel-9.4/debian-12.cgz/lkp-icl-2sp2/{test}",
        "",
        "commit: ",
        f'  {base} ("sched/fair: tidy the wake path")',
        f'  {COMMIT[:10]} ("sched/fair: wake the waker\'s sibling")',
        "",
        f"{header_base:>16} {COMMIT[:27]} ",
        "---------------- --------------------------- ",
        "         %stddev     %change         %stddev",
        "             \\          |                \\  ",
        "    217.40           +13.5%     246.74        uptime.boot",
        row,
        "   4679401           -15.8%    3938145        vmstat.system.cs",
        "",
        "",
        "Disclaimer:",
    ]
    return "\n".join(lines) + "\n"


STRESS_NG: dict[str, Any] = {
    "test": "stress-ng",
    "metric": "stress-ng.switch.ops_per_sec",
    "change": "-11.0%",
    "params": ("nr_threads: 100%", "testtime: 60s", "test: switch"),
    # newer reports: the headline's change unsigned, the row's signed
    "headline": "kernel test robot noticed a 11.0% regression of stress-ng.switch.ops_per_sec on:",
}


# --- the fields and where they came from -------------------------------------------------
def test_a_hackbench_report_gives_each_field_with_its_lines() -> None:
    found = parse(report())
    assert found.testcase is not None and found.testcase.value == "hackbench:pipe"
    assert [x.number for x in found.testcase.lines] == [11, 20]  # testcase:, ipc: pipe
    assert found.metric is not None and found.metric.value == "seconds"
    # higher-is-better throughput, a time lower-is-better: said, with the change inverted
    assert "higher-is-better" in found.metric.how and "lower-is-better" in found.metric.how
    assert "+11.4% seconds" in found.metric.how
    assert found.good is not None and found.good.value == BASE_LONG  # the header's longer hash
    assert found.bad is not None and found.bad.value == COMMIT
    assert found.bad.lines[0].number == 8 and found.bad.lines[0].text.startswith("commit: ")
    assert found.mode.value == "regression"
    assert found.change_pct == -10.2 and found.change is not None
    assert "12345 -> 11089" in found.change.how
    assert (found.url, found.branch) == (KERNEL_ORG, "master")
    assert found.not_carried is not None
    assert "nr_threads: 800%" in found.not_carried.value and "ipc" not in found.not_carried.value
    assert found.missing == {}
    lkp_report.check(found)


def test_a_stress_ng_report_gives_its_stressor_and_ops_per_sec() -> None:
    found = parse(report(**STRESS_NG))
    assert found.testcase is not None and found.testcase.value == "stress-ng:switch"
    assert "test: switch" in str(found.testcase.lines[-1])
    assert found.metric is not None and found.metric.value == "ops_per_sec"
    assert "both higher is better" in found.metric.how
    assert found.change_pct == -11.0  # the row's sign
    assert found.good is not None and found.bad is not None
    assert (found.good.value, found.bad.value) == (BASE_LONG, COMMIT)
    # without the row, the unsigned headline's sign comes from the metric's direction
    rowless = parse(report(**STRESS_NG, row="     1 +1.0% 2 vmstat.system.in"))
    assert rowless.change_pct == -11.0


def test_the_mapped_metrics_are_their_testcases() -> None:
    names = {
        "hackbench": "hackbench:pipe",
        "stress-ng": "stress-ng:switch",
        "perf-bench-sched-pipe": "perf-bench:sched-pipe",
        "perf-bench-sched-messaging": "perf-bench:sched-messaging",
        "perf-bench-futex": "perf-bench:futex-hash",
        "perf-bench-mem": "perf-bench:mem-memcpy",
        "sysbench-cpu": "sysbench:cpu",
        "sysbench-memory": "sysbench:memory",
        "sysbench-threads": "sysbench:threads",
        "sysbench-mutex": "sysbench:mutex",
        "cyclictest": "cyclictest",
    }
    assert set(names) == set(lkp_report.TESTS)
    for test, name in names.items():
        manifest = tomllib.loads(kinds.render(name).manifest)
        for m in lkp_report.TESTS[test].metrics:
            assert m.metric in manifest["metrics"], (test, m.metric)
            assert manifest["metrics"][m.metric]["better"] == m.better, (test, m.metric)


def test_a_tag_as_base_an_improvement_and_a_whole_mail() -> None:
    tagged = parse(report(base="v6.12-rc1", header_base="v6.12-rc1"))
    assert tagged.good is not None and tagged.good.value == "v6.12-rc1"
    better = parse(report(change="+10.5%", word="improvement"))
    assert better.mode.value == "fix"  # the commit that made it, found as a fix is
    assert better.good is not None and better.good.value == COMMIT
    assert better.bad is not None and better.bad.value == BASE_LONG
    # a whole mail: headers, a quoted-printable ISO 8859-1 body with soft line breaks
    body = report().split("\n", 2)[2].encode("latin-1")
    qp = body.replace(b"=", b"=3D").replace("±".encode("latin-1"), b"=B1")
    qp = qp.replace(b"kernel test robot noticed", b"kernel test =\nrobot noticed")
    raw = (
        b"From: kernel test robot <lkp@example.org>\n"
        b"Subject: [linus:master] [sched/fair]  1234abcd56: hackbench.throughput\n"
        b" -10.2% regression\n"
        b"Content-Type: text/plain; charset=iso-8859-1\n"
        b"Content-Transfer-Encoding: quoted-printable\n\n" + qp
    )
    whole = parse(mail_text(raw))
    assert whole.testcase is not None and whole.testcase.value == "hackbench:pipe"
    assert whole.change_pct == -10.2 and whole.missing == {}


def test_a_named_tree_that_is_the_report_s_repository() -> None:
    found = parse(report())
    upstream = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git"
    trees = [
        Tree("next", upstream.replace("torvalds/linux", "next/linux-next"), None, Path()),
        Tree("stable", upstream, "linux-6.1.y", Path()),
        Tree("linus", upstream, None, Path()),
    ]  # fmt: skip
    matched = with_tree(found, trees)
    assert matched.tree is not None and matched.tree.value == "linus"
    assert "every branch" in matched.tree.how
    none = with_tree(found, trees[:2])
    assert none.tree is None and "is no named tree" in none.missing["tree"]
    with pytest.raises(UserError, match="is no named tree"):
        lkp_report.check(none)
    lkp_report.check(none, {"tree"})  # --repo or --tree given


# --- malformed and hostile mails: one line each --------------------------------------------
def test_a_report_without_its_commit_line_says_so() -> None:
    text = report(commit_line="commit 1234abcd5678 (the robot's line cut)")
    with pytest.raises(UserError, match="no 'commit: <40 hex digits>") as err:
        lkp_report.check(parse(text))
    assert "\n" not in str(err.value) and "give --bad REV" in str(err.value)


def test_an_unknown_test_names_what_is_missing() -> None:
    text = report(test="will-it-scale", metric="will-it-scale.per_process_ops")
    with pytest.raises(UserError, match="LKP test 'will-it-scale' has no kbisect testcase"):
        lkp_report.check(parse(text))
    with pytest.raises(UserError, match="no stressor"):  # a stress-ng report without one
        lkp_report.check(parse(report(test="stress-ng", metric="stress-ng.ops", params=())))


def test_a_10_mb_mail_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.mail"
    big.write_bytes(report().encode() + b"x" * (10 << 20))
    with pytest.raises(UserError, match="over 1 MiB"):
        lkp_report.read_mail(str(big))
    os.mkfifo(tmp_path / "fifo")  # never waited on
    for odd in (tmp_path, tmp_path / "fifo"):
        with pytest.raises(UserError, match="not a regular file"):
            lkp_report.read_mail(str(odd))
    with pytest.raises(UserError, match="binary data"):
        mail_text(b"testcase: hackbench\n\0\0\0")
    with pytest.raises(UserError, match="not an LKP report"):
        parse("Hello,\n\nplease pull.\n")


def _cli(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, list[str], list[str], list[JobOptions]]:
    """`kbisect ARGV` with the job's start stubbed: the options it would plan with."""
    planned: list[JobOptions] = []

    def plan(opts: JobOptions, chain: Any, settings: Any) -> tuple[object, str]:
        planned.append(opts)
        return object(), ""

    monkeypatch.setattr(investigation, "plan", plan)
    monkeypatch.setattr("kbisect.cli.jobs.with_client", lambda *_: 0)
    code = main([*argv, "--no-start"])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines(), planned


@pytest.mark.parametrize("hostile", ["no-commit", "unknown-test", "10-mb"])
def test_hostile_mails_on_the_command_line_are_one_line(
    hostile: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mail = tmp_path / "lkp.mail"
    if hostile == "no-commit":
        mail.write_text(report(commit_line="commit:"))
    elif hostile == "unknown-test":
        mail.write_text(report(test="netperf", metric="netperf.Throughput_Mbps"))
    else:
        mail.write_bytes(b"\x1b[31m" * ((10 << 20) // 5))
    argv = ["bisect", "--from-report", str(mail), "--repo", str(tmp_path)]
    code, out, err, planned = _cli(argv, capsys, monkeypatch)
    assert code == 2 and out == [] and planned == []
    assert len(err) == 1 and err[0].startswith("kbisect: error: "), err
    assert {"no-commit": "no 'commit:", "unknown-test": "'netperf'", "10-mb": "over 1 MiB"}[
        hostile
    ] in err[0]


# --- the command ---------------------------------------------------------------------------
def _tree(cache: Path, name: str, url: str) -> None:
    """A named tree's mirror as `kbisect tree add` leaves it, without fetching."""
    path = cache / "trees" / f"{name}.git"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "config", "remote.origin.url", url], check=True)


def test_dry_run_prints_each_field_and_starts_nothing(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(cache, "linus", "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git")
    mail = tmp_path / "lkp.mail"
    mail.write_text(report(commit_line=f'commit: {COMMIT} ("a \x1b[2J subject")'))
    code, out, err, planned = _cli(
        ["bisect", "--from-report", str(mail), "--dry-run"], capsys, monkeypatch
    )
    assert code == 0 and planned == [] and err == []
    names = [line.split(":", 1)[0] for line in out]
    assert names == ["testcase", "metric", "mode", "good", "bad", "change", "tree", "not carried"]
    assert out[0].startswith('testcase: hackbench:pipe (line 11 "testcase: hackbench"')
    assert out[3].startswith(f"good: {BASE_LONG} (line 32 ")
    assert out[6].startswith("tree: linus (line 9 ") and "every branch" in out[6]
    assert not any("\x1b" in line for line in out)  # the mail's control characters


def test_the_report_fills_the_job_and_the_command_line_wins(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(cache, "linus", "git://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git")
    mail = tmp_path / "lkp.mail"
    mail.write_text(report(**STRESS_NG))
    code, out, err, planned = _cli(["bisect", "--from-report", str(mail)], capsys, monkeypatch)
    assert code == 0 and out == [] and err[0].startswith("testcase: stress-ng:switch (")
    (opts,) = planned
    assert (opts.testcase, opts.metric, opts.mode) == (
        "stress-ng:switch",
        "ops_per_sec",
        "regression",
    )
    assert (opts.good, opts.bad, opts.tree, opts.repo) == ([BASE_LONG], COMMIT, "linus", None)
    # given on the command line: theirs; the report's metric is not another testcase's
    argv = ["bisect", "--from-report", str(mail), "--testcase", "sched-pipe", "--good", "v6.1"]
    code, out, err, planned = _cli([*argv, "--repo", str(tmp_path)], capsys, monkeypatch)
    (opts,) = planned
    assert (opts.testcase, opts.metric, opts.good, opts.bad) == (
        "sched-pipe",
        None,
        ["v6.1"],
        COMMIT,
    )
    assert (opts.repo, opts.tree) == (str(tmp_path), None)
    assert "testcase: sched-pipe (--testcase; the report's: stress-ng:switch)" in err
    assert any(x.startswith("metric: the testcase's primary") for x in err)


def test_the_inverted_change() -> None:
    assert round(inverted_pct(-10.0), 1) == 11.1 and round(inverted_pct(25.0), 1) == -20.0
