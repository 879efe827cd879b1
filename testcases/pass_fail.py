"""A pass/fail testcase's verdict on one boot: good, bad (and how), or a skip. Pure.

A boot is bad when it ends in one of the manifest's bad outcomes (the script failed, the
kernel panicked, the guest hung) and, when the job names a signature, its console shows
it: hunting one crash, a different panic says nothing about the culprit (a skip, as for
`git bisect run` users). A bad boot carries the console lines a kernel engineer pastes
into a bug: the oops or panic, or the failing script's last words.
"""

import re
from dataclasses import dataclass

from kbisect.errors import BootError, TestcaseFailedError, UserError
from kbisect.model import Outcome
from kbisect.testcases import kselftest, ktap
from kbisect.testcases.manifest import FAILS, HANG, PANIC, Manifest
from kbisect.testcases.signature import Pattern, SignatureError, compile_signature

BAD_WORD = {Outcome.TESTCASE_FAILED: FAILS, Outcome.PANIC: PANIC, Outcome.HANG: HANG}
# Where a kernel's report of its own failure starts and ends on the console.
REPORT_START = re.compile(
    r"-+\[ cut here \]-+|BUG: |kernel BUG at|Oops|WARNING: |Kernel panic|general protection"
)
REPORT_END = re.compile(r"---\[ end ")
EXCERPT_LINES = 40  # a report's lines at most; a script's or a hang's last lines: half
LINE_CAP = 1000  # characters of a console line searched or quoted
TESTCASE_END = "kbisect: testcase exited with"


@dataclass(frozen=True)
class Judged:
    bad: str  # "" for a good boot, else the outcome that made it bad (fails, panic, hang)
    excerpt: str = ""  # the console's lines that show why it is bad


def judge(
    manifest: Manifest, outcome: Outcome, detail: str, console: str, signature: str = ""
) -> Judged:
    """The boot's verdict; BootError or TestcaseFailedError for a boot that says nothing
    (it cannot test, or it failed in a way the job does not hunt): the commit is skipped."""
    if outcome is Outcome.SUCCESS:
        return Judged("")
    word = BAD_WORD.get(outcome)
    skip = BootError if outcome in (Outcome.PANIC, Outcome.HANG) else TestcaseFailedError
    if word is None:
        raise TestcaseFailedError(detail)
    if word not in manifest.bad:
        raise skip(f"{detail} (testcase {manifest.name} counts only {', '.join(manifest.bad)})")
    lines = [line[:LINE_CAP] for line in console.splitlines()]
    if signature:
        try:  # RE2: linear in each line, never a freeze
            pattern = compile_signature(signature)
        except SignatureError as exc:  # a job submitted before signatures were RE2's
            raise UserError(
                f"this job's signature {exc}: cancel it and submit it again with one RE2 takes"
            ) from exc
        if not any(pattern.search(line) for line in lines):
            raise skip(f"{detail} (not the signature {signature!r}: another failure)")
        return Judged(word, _reason(manifest, word, console) or excerpt(lines, word, pattern))
    return Judged(word, _reason(manifest, word, console) or excerpt(lines, word))


def _reason(manifest: Manifest, word: str, console: str) -> str:
    """A failed kselftest's reason: its failing tests' KTAP lines (testcases.ktap: each one
    printable line, bounded)."""
    return ktap.reason(console) if word == FAILS and kselftest.is_kselftest(manifest.name) else ""


def excerpt(lines: list[str], word: str, pattern: Pattern | None = None) -> str:
    """The kernel's own report (from its first line, or the signature's, to its end
    marker), else the last lines before the script's end (a failed script, a hang)."""
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if REPORT_START.search(line) or (pattern is not None and pattern.search(line))
        ),
        None,
    )
    if start is not None and word != FAILS:
        end = min(len(lines), start + EXCERPT_LINES)
        stop = next((j for j in range(start, end) if REPORT_END.search(lines[j])), end - 1)
        return "\n".join(lines[start : stop + 1])
    last = next((i for i in range(len(lines) - 1, -1, -1) if TESTCASE_END in lines[i]), None)
    upto = len(lines) if last is None else last + 1
    tail = [line for line in lines[:upto] if line.strip()][-EXCERPT_LINES // 2 :]
    return "\n".join(tail)
