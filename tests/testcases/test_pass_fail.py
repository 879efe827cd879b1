"""Pass/fail testcases: the manifest's keys, and one boot's verdict from its outcome."""

import shutil
from pathlib import Path

import pytest

from kbisect.errors import BootError, ManifestError, TestcaseFailedError
from kbisect.model import Outcome
from kbisect.testcases import manifest, pass_fail, scoring

OOPS = """\
[    1.20] Run /init as init process
[    1.31] ------------[ cut here ]------------
[    1.31] kernel BUG at drivers/nvme/host/core.c:812!
[    1.32] Oops: invalid opcode: 0000 [#1] SMP
[    1.32] RIP: 0010:nvme_setup_cmd+0x1a/0x40
[    1.33] Call Trace:
[    1.33]  <TASK>
[    1.34] ---[ end trace 0000000000000000 ]---
[    1.35] Kernel panic - not syncing: Fatal exception
[    1.36] ---[ end Kernel panic - not syncing: Fatal exception ]---
"""


def test_the_boots_testcase_is_judged_on_passing() -> None:
    m = manifest.load("boots")
    assert m.pass_fail and m.primary == manifest.PASSED
    assert m.metrics[manifest.PASSED].exact and m.repetitions_for(m.primary) == 1
    assert m.bad == manifest.BAD_OUTCOMES and not m.exclusive and not m.disks


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = tmp_path / "lib"
    shutil.copytree(manifest.BUILTIN_DIR / "boots", lib / "mine")
    path = lib / "mine" / "manifest.toml"
    path.write_text(path.read_text().replace('"boots"', '"mine"', 1))
    monkeypatch.setenv("KBISECT_TESTCASES", str(lib))
    return lib / "mine"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('"pass-fail"', '"maybe"'), "'verdict' must be one of metric"),
        (lambda t: t.replace('"fails", ', '"oops", '), "'bad' must be a non-empty list"),
        (lambda t: t.replace('bad = ["fails", "panic", "hang"]', "bad = []"), "non-empty"),
        (lambda t: t + 'signature = "kernel BUG (at"\n', "not a regular expression"),
        (lambda t: t + f'signature = "{"x" * 201}"\n', "over 200 characters"),
        (lambda t: t + 'primary = "passed"\n', "drop 'primary'"),
        (lambda t: t + '[metrics.passed]\nunit = "x"\nbetter = "higher"\n', "verdict's own"),
    ],
)
def test_a_malformed_pass_fail_manifest_is_one_clear_line(folder: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    path = folder / "manifest.toml"
    path.write_text(edit(path.read_text()))
    with pytest.raises(ManifestError, match=message):
        manifest.load("mine")


def test_bad_and_signature_belong_to_pass_fail_testcases(tmp_path: Path) -> None:
    shutil.copytree(manifest.BUILTIN_DIR / "nvme-snapshot-read", tmp_path / "nvme-snapshot-read")
    path = tmp_path / "nvme-snapshot-read" / "manifest.toml"
    path.write_text('signature = "BUG"\n' + path.read_text())
    with pytest.raises(ManifestError, match="'signature' is for verdict"):
        manifest.load_folder(tmp_path / "nvme-snapshot-read")


def test_outcomes_are_good_bad_or_skipped() -> None:
    m = manifest.load("boots")
    assert pass_fail.judge(m, Outcome.SUCCESS, "", "") == pass_fail.Judged("")
    judged = pass_fail.judge(m, Outcome.PANIC, "Kernel panic", OOPS)
    assert judged.bad == manifest.PANIC
    assert pass_fail.judge(m, Outcome.HANG, "guest hung", "x\n").bad == manifest.HANG
    assert pass_fail.judge(m, Outcome.TESTCASE_FAILED, "exit 1", "x\n").bad == manifest.FAILS
    with pytest.raises(TestcaseFailedError, match="cannot test"):
        pass_fail.judge(m, Outcome.CANNOT_TEST, "exit 125 (cannot test)", "")


def test_an_outcome_the_testcase_does_not_count_is_a_skip(folder: Path) -> None:
    path = folder / "manifest.toml"
    path.write_text(path.read_text().replace('bad = ["fails", "panic", "hang"]', 'bad = ["fails"]'))
    m = manifest.load("mine")
    with pytest.raises(BootError, match="counts only fails"):
        pass_fail.judge(m, Outcome.PANIC, "Kernel panic", OOPS)
    assert pass_fail.judge(m, Outcome.TESTCASE_FAILED, "exit 1", "").bad == manifest.FAILS


def test_with_a_signature_another_panic_is_a_skip() -> None:
    m = manifest.load("boots")
    hunted = r"kernel BUG at drivers/nvme/host/core\.c"
    assert pass_fail.judge(m, Outcome.PANIC, "p", OOPS, hunted).bad == manifest.PANIC
    other = "[ 1.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n"
    with pytest.raises(BootError, match="not the signature"):
        pass_fail.judge(m, Outcome.PANIC, "p", other, hunted)


def test_a_bad_boot_carries_the_kernels_report_from_its_first_line_to_its_end() -> None:
    m = manifest.load("boots")
    lines = pass_fail.judge(m, Outcome.PANIC, "p", OOPS).excerpt.splitlines()
    assert lines[0].endswith("------------[ cut here ]------------")
    assert lines[-1].endswith("---[ end trace 0000000000000000 ]---")
    assert any("RIP: 0010:nvme_setup_cmd" in line for line in lines)


def test_a_failed_script_carries_its_last_words() -> None:
    console = "".join(f"line {i}\n" for i in range(40))
    console += "dd: error reading '/dev/nvme0n1': Input/output error\n"
    console += "kbisect: testcase exited with 1\n[ 3.0] reboot: Restarting system\n"
    m = manifest.load("boots")
    text = pass_fail.judge(m, Outcome.TESTCASE_FAILED, "exit 1", console).excerpt
    lines = text.splitlines()
    assert lines[-2:] == [
        "dd: error reading '/dev/nvme0n1': Input/output error",
        "kbisect: testcase exited with 1",
    ]
    assert len(lines) == pass_fail.EXCERPT_LINES // 2


def test_a_pass_fail_score_is_one_or_zero() -> None:
    m = manifest.load("boots")
    good = scoring.passed(m, [], 0, good=True)
    bad = scoring.passed(m, [], 0, good=False)
    assert good.primary_metric.samples == [1.0] and bad.primary_metric.samples == [0.0]


def test_a_job_s_signature_and_flaky_belong_to_pass_fail_testcases() -> None:
    from kbisect.errors import UserError

    boots, metric = manifest.load("boots"), manifest.load("nvme-snapshot-read")
    assert (
        manifest.job_signature(boots, "") == "" and manifest.job_signature(boots, "BUG:") == "BUG:"
    )
    with pytest.raises(UserError, match="--signature is for pass-fail testcases"):
        manifest.job_signature(metric, "BUG:")
    with pytest.raises(UserError, match="not a regular expression"):
        manifest.job_signature(boots, "BUG (at")
    assert manifest.job_flaky(boots, True) and not manifest.job_flaky(boots, False)
    assert not manifest.job_flaky(metric, False)
    with pytest.raises(UserError, match="--flaky is for pass-fail testcases"):
        manifest.job_flaky(metric, True)


def test_min_effect_is_a_metrics_change_or_a_flaky_jobs_change_in_failure_rate() -> None:
    from kbisect.contract import DEFAULT_MIN_EFFECT, DEFAULT_MIN_RATE_STEP
    from kbisect.errors import UserError
    from kbisect.testcases.tuning import check_tuning, least_changes

    boots, metric = manifest.load("boots"), manifest.load("nvme-snapshot-read")
    assert least_changes(metric, False, None) == (DEFAULT_MIN_EFFECT, DEFAULT_MIN_RATE_STEP)
    assert least_changes(metric, False, 2) == (0.02, DEFAULT_MIN_RATE_STEP)
    assert least_changes(boots, True, None) == (DEFAULT_MIN_EFFECT, DEFAULT_MIN_RATE_STEP)
    assert least_changes(boots, True, 10) == (DEFAULT_MIN_EFFECT, 0.1)
    assert least_changes(boots, False, None) == (DEFAULT_MIN_EFFECT, DEFAULT_MIN_RATE_STEP)
    with pytest.raises(UserError, match=r"passes or fails.*add --flaky"):
        least_changes(boots, False, 10)
    for pct in (0, 100):  # out of range either way, also as a failure rate
        for kind, flaky in ((metric, False), (boots, True)):
            effect, step = least_changes(kind, flaky, pct)
            with pytest.raises(UserError, match=f"--min-effect {pct}: give a percentage"):
                check_tuning(kind, None, effect, 96, False, step)


def test_check_reports_a_pass_fail_verdict_and_a_bad_boot_is_no_fault_of_the_testcase(
    folder: Path,
) -> None:
    from kbisect.testcases import check

    path = folder / "manifest.toml"
    path.write_text(path.read_text() + '\n[metrics.uptime]\nunit = "s"\nbetter = "lower"\n')
    m = manifest.load("mine")
    good = check.check_score(m, scoring.passed(m, [], 0, good=True), check.CheckReport("mine"))
    assert "verdict: good" in good.notes and not good.ok  # uptime never reported
    bad = check.check_score(
        m, scoring.passed(m, [], 0, good=False), check.CheckReport("mine"), "panic"
    )
    assert "verdict: bad (panic)" in bad.notes and bad.ok


# A pattern that backtracks exponentially in Python's `re`: 6.8 s on a 51-character line.
HOSTILE = r"(\w+\s?)+:$"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (r"(BUG) \1", "invalid escape sequence"),  # a backreference
        (r"BUG(?= at)", "invalid perl operator"),  # lookahead
        (r"(?<!soft )lockup", "invalid perl operator"),  # lookbehind
    ],
)
def test_a_signature_re2_cannot_match_in_linear_time_is_refused_at_submit(
    given: str, message: str
) -> None:
    from kbisect.errors import UserError

    refused = f"--signature is not a regular expression in RE2.*{message}"
    with pytest.raises(UserError, match=refused):
        manifest.job_signature(manifest.load("boots"), given)


@pytest.mark.parametrize("words", [8, 190], ids=["a-51-character-line", "a-whole-console"])
def test_a_hostile_signature_leaves_the_worker_s_other_threads_running(words: int) -> None:
    """The judge of one job's boot (a hostile signature over console lines it backtracks
    on: one line of 51 characters, which took `re` 6.8 s, or a whole capped console of
    long ones) runs while another job's boot, in another thread of the same worker
    process, goes on and finishes."""
    import threading
    import time

    from kbisect.testcases.runner import CONSOLE_CAP

    boots = manifest.load("boots")
    line = "[    1.20] " + "word " * words  # no colon at the end: `re` tries every split
    console = line if words < 10 else (line + "\n") * (CONSOLE_CAP // (len(line) + 1))
    other_boot_started, other_boot_done = threading.Event(), threading.Event()
    gaps: list[float] = []

    def other_boot() -> None:  # a second job's boot: short steps that each need the GIL
        last = time.monotonic()
        for _ in range(50):
            other_boot_started.set()
            time.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
        other_boot_done.set()

    judged: list[BaseException] = []

    def judge() -> None:
        try:
            pass_fail.judge(boots, Outcome.PANIC, "panic", console, HOSTILE)
        except BaseException as exc:  # a skip: not the signature
            judged.append(exc)

    matcher = threading.Thread(target=judge, daemon=True)
    booter = threading.Thread(target=other_boot, daemon=True)
    booter.start()
    other_boot_started.wait()
    matcher.start()
    assert other_boot_done.wait(timeout=20), "the other boot stopped while a signature was matched"
    matcher.join(timeout=20)
    assert not matcher.is_alive(), "the signature's match did not end"
    assert isinstance(judged[0], BootError) and "not the signature" in str(judged[0])
    assert max(gaps) < 2.0, f"the other boot stalled {max(gaps):.1f} s"


def test_a_running_job_s_signature_re2_refuses_ends_the_job_in_one_line() -> None:
    """A job submitted before signatures were RE2's may carry a lookahead: its boot is
    bad input (the job fails with the reason), not a host fault retried for ever."""
    from kbisect.errors import UserError

    with pytest.raises(UserError, match="this job's signature is not a regular expression"):
        pass_fail.judge(manifest.load("boots"), Outcome.PANIC, "panic", OOPS, "BUG(?= at)")
