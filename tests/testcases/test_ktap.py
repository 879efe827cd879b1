"""kselftest's TAP13/KTAP output read into git bisect run's statuses, and the failing
tests' lines as a bad boot's reason: outputs as run_kselftest.sh prints them (6.1's
runner), nested KTAP subtests, hostile and huge outputs, and the guest's command."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from kbisect.testcases import ktap

PASS = """\
TAP version 13
1..1
# selftests: timers: posix_timers
# TAP version 13
# 1..6
# ok 1 Passed ITIMER_VIRTUAL
# ok 2 Passed ITIMER_PROF
# # Totals: pass:6 fail:0 xfail:0 xpass:0 skip:0 error:0
ok 1 selftests: timers: posix_timers
"""
FAIL = """\
TAP version 13
1..2
# selftests: timers: nanosleep
ok 1 selftests: timers: nanosleep
# selftests: timers: posix_timers
# TAP version 13
# 1..3
# ok 1 Passed ITIMER_VIRTUAL
# not ok 2 ITIMER_PROF: timer fired late
# ok 3 # SKIP no CLOCK_THREAD_CPUTIME_ID
# # Totals: pass:1 fail:1 xfail:0 xpass:0 skip:1 error:0
not ok 2 selftests: timers: posix_timers # exit=1
"""
SKIPPED = """\
TAP version 13
1..1
# selftests: timers: rtcpie
# SKIP: /dev/rtc0 is not there
ok 1 selftests: timers: rtcpie # SKIP
"""
# KTAP v1: subtests indented four spaces, a nested suite's own failure inside.
NESTED = """\
KTAP version 1
1..1
    KTAP version 1
    # Subtest: suite
    1..2
        KTAP version 1
        1..1
        not ok 1 deep_case
    not ok 1 inner_case
    ok 2 other_case
not ok 1 suite
"""


def test_a_passing_test_is_good() -> None:
    result = ktap.read(PASS.splitlines(), 0)
    assert (result.status, result.passed, result.failed, result.planned) == (ktap.GOOD, 1, 0, 1)
    assert result.reason == []


def test_a_failing_test_is_bad_with_its_lines_as_the_reason() -> None:
    result = ktap.read(FAIL.splitlines(), 0)
    assert (result.status, result.passed, result.failed) == (ktap.BAD, 1, 1)
    assert result.reason == [
        "# not ok 2 ITIMER_PROF: timer fired late",
        "not ok 2 selftests: timers: posix_timers # exit=1",
    ]


def test_a_skip_or_no_result_cannot_test() -> None:
    assert ktap.read(SKIPPED.splitlines(), 0).status == ktap.SKIP
    assert ktap.read([], 0).status == ktap.SKIP
    # the runner said 'No such test' and printed nothing
    assert ktap.read(["No such test 'timers:nope'"], 1).status == ktap.SKIP
    # kselftest's skip code, whatever was printed before
    assert ktap.read(PASS.splitlines(), ktap.KSFT_SKIP).status == ktap.SKIP


def test_a_missing_result_cannot_test_unless_one_failed() -> None:
    """The plan says 2, one result came (the runner was killed by the guest's timeout)."""
    cut = "TAP version 13\n1..2\nok 1 selftests: timers: a\n# selftests: timers: b\n"
    assert ktap.read(cut.splitlines(), 124).status == ktap.SKIP
    failed = "TAP version 13\n1..3\nnot ok 1 selftests: timers: a # TIMEOUT 45 seconds\n"
    assert ktap.read(failed.splitlines(), 124).status == ktap.BAD


def test_skips_beside_passes_are_good_and_todo_is_no_failure() -> None:
    out = "1..3\nok 1 a\nok 2 b # SKIP not here\nnot ok 3 c # TODO known\n"
    result = ktap.read(out.splitlines())
    assert (result.status, result.passed, result.skipped) == (ktap.GOOD, 1, 2)


def test_nested_ktap_failures_are_the_reason() -> None:
    result = ktap.read(NESTED.splitlines(), 1)
    assert result.status == ktap.BAD
    assert [r.strip() for r in result.reason] == [
        "not ok 1 deep_case",
        "not ok 1 inner_case",
        "not ok 1 suite",
    ]


def test_hostile_lines_are_printable_bounded_and_never_counted_as_results() -> None:
    out = [
        "1..1",
        "ok",  # no number: not a result
        "okay 1 not a result",
        "[   12.345678] ok 1 a kernel line",
        "not ok 99999999999999999999 giant number",  # not a result (and no giant int)
        "\x1b[2J\x00 not ok 1 escape",
        "not ok 1 evil\x1b]0;title\x07 \u2028/close\r",
        "not ok 1 " + "A" * 100_000,
    ]
    result = ktap.read(out)
    assert (result.status, result.failed, result.passed) == (ktap.BAD, 2, 0)
    assert result.reason[0] == "not ok 1 evil ]0;title /close"
    assert all(r.isprintable() and len(r) <= ktap.REASON_CHARS for r in result.reason)
    assert result.reason[1].endswith("\u2026")


def test_a_huge_output_keeps_a_bounded_reason() -> None:
    def lines() -> Iterator[str]:  # 200k lines, never a list
        yield "1..100000"
        for i in range(1, 100_001):
            yield f"# not ok {i} sub"
            yield f"not ok {i} selftests: t: {i}"

    result = ktap.read(lines())
    assert (result.status, result.failed) == (ktap.BAD, 100_000)
    assert len(result.reason) == ktap.REASON_LINES
    assert result.reason[:2] == ["# not ok 1 sub", "not ok 1 selftests: t: 1"]


def test_reason_reads_a_console_among_kernel_lines() -> None:
    console = "[    1.0] Linux version 6.1\n" + FAIL + "kbisect: testcase exited with 1\n"
    assert ktap.reason(console).splitlines()[-1] == (
        "not ok 2 selftests: timers: posix_timers # exit=1"
    )
    assert ktap.reason(PASS) == ""


def test_the_guest_command_exits_with_the_verdict(tmp_path: Path) -> None:
    def run(text: str, rc: str) -> tuple[int, str]:
        out = tmp_path / "out"
        out.write_text(text)
        done = subprocess.run(
            [sys.executable, ktap.__file__, str(out), rc], capture_output=True, text=True
        )
        return done.returncode, done.stdout

    assert run(PASS, "0")[0] == 0
    status, said = run(FAIL, "0")
    assert status == 1
    assert said.splitlines()[0] == (
        "kselftest: bad: 1 passed, 1 failed, 0 skipped of 2 planned (runner exit 0)"
    )
    assert said.splitlines()[-1] == "kselftest: not ok 2 selftests: timers: posix_timers # exit=1"
    assert run(SKIPPED, "4")[0] == 125
    assert run("", "garbage")[0] == 125
    missing = subprocess.run([sys.executable, ktap.__file__, str(tmp_path / "none")], check=False)
    assert missing.returncode == 125
