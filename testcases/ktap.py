"""kselftest's output (TAP13, KTAP) read into a verdict, as `git bisect run` takes one.

The runner (`run_kselftest.sh`) prints one top-level result a test, `ok N name`,
`ok N name # SKIP` or `not ok N name # exit=1` (`# TIMEOUT ...`), and each test's own
output prefixed with `# ` (a test's own KTAP subtests among it). The verdict:

- a top-level `not ok` (not `# SKIP`, not `# TODO`): the test failed, bad (exit 1);
- else every test the plan (`1..N`) announced passed, or was skipped beside one that
  passed: good (exit 0);
- else (every test skipped, a result missing, no result at all): cannot test (exit 125).
  The runner's own exit code only says so when it printed no result (4: kselftest's
  skip).

The failing tests' lines (each top-level `not ok` and the nested `not ok` subtests
printed before it) are the boot's reason: at most REASON_LINES lines, each one printable
line of at most REASON_CHARS characters (the output is the guest's: untrusted).

Standard library only: the file is shipped to the guest and run
there by the host userland's python3 (`python3 ktap.py OUTPUT RC`), and the host reads the
console's copy of the same output with it (`reason`).
"""

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

GOOD, BAD, SKIP = 0, 1, 125  # git bisect run's statuses
KSFT_SKIP = 4  # kselftest's exit code for a skipped test
LINE_CAP = 4096  # characters of a line read (the rest is ignored)
REASON_LINES = 20
REASON_CHARS = 200
# `ok 3 name # directive`: a result; its number is kept short (no giant int to parse).
RESULT = re.compile(r"^(not ok|ok)\s+(\d{1,9})\b\s*-?\s*([^#]*?)\s*(?:#\s*(.*))?$")
PLAN = re.compile(r"^1\.\.(\d{1,9})\s*(?:#.*)?$")
NESTED = re.compile(r"^(?:#\s?|\s+)+")  # a test's own lines: "# " or KTAP's indent


@dataclass
class Result:
    """What the output says: the verdict's status (GOOD, BAD, SKIP) and why."""

    status: int
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    planned: int | None = None
    reason: list[str] = field(default_factory=list)  # the failing tests' lines

    @property
    def summary(self) -> str:
        word = {GOOD: "good", BAD: "bad"}.get(self.status, "cannot test")
        plan = "" if self.planned is None else f" of {self.planned} planned"
        return f"{word}: {self.passed} passed, {self.failed} failed, {self.skipped} skipped{plan}"


def printable(text: str, cap: int = REASON_CHARS) -> str:
    """One printable line of at most `cap` characters (as kbisect.infra.printable)."""
    s = "".join(c if c.isprintable() else " " for c in text)
    s = " ".join(s.split())
    return s if len(s) <= cap else s[: cap - 1] + "\u2026"


def _skipped(directive: str) -> bool:
    word = directive.split(None, 1)[0].upper() if directive.strip() else ""
    return word in ("SKIP", "TODO")


def read(lines: Iterable[str], rc: int | None = None) -> Result:
    """The verdict of a runner's output (`rc`: its exit code, if known)."""
    passed = failed = skipped = 0
    planned: int | None = None
    reason: list[str] = []
    nested: list[str] = []  # the current test's failing subtests, last ones kept
    for raw in lines:
        line = raw[:LINE_CAP].rstrip("\r\n")
        inner = NESTED.sub("", line, count=1)
        if inner != line:  # a test's own output
            m = RESULT.match(inner.strip())
            if m and m.group(1) == "not ok" and not _skipped(m.group(4) or ""):
                nested = [*nested[-(REASON_LINES // 2 - 1) :], line]
            continue
        line = line.strip()
        plan = PLAN.match(line)
        if plan and planned is None:
            planned = int(plan.group(1))
            continue
        m = RESULT.match(line)
        if m is None:
            continue
        if _skipped(m.group(4) or ""):
            skipped += 1
        elif m.group(1) == "ok":
            passed += 1
        else:
            failed += 1
            reason += [printable(n) for n in [*nested, line]]
            reason = reason[:REASON_LINES]
        nested = []
    results = passed + failed + skipped
    if failed:
        status = BAD
    elif passed and (planned is None or results >= planned) and rc != KSFT_SKIP:
        status = GOOD
    else:  # all skipped, a result missing, or none (rc KSFT_SKIP: the runner skipped)
        status = SKIP
    return Result(status, passed, failed, skipped, planned, reason)


def reason(console: str) -> str:
    """The failing tests' lines in a boot's console, as a bad boot's reason."""
    return "\n".join(read(console.splitlines()).reason)


def main(argv: list[str]) -> int:
    """`ktap.py OUTPUT RC`: the verdict printed (and its reason), and as the status."""
    rc = int(argv[2]) if len(argv) > 2 and argv[2].isdigit() and len(argv[2]) < 4 else None
    try:
        with open(argv[1], encoding="utf-8", errors="replace") as f:
            result = read(f, rc)
    except (OSError, IndexError) as exc:
        print(f"kselftest: cannot read the runner's output ({exc})")
        return SKIP
    print(f"kselftest: {result.summary} (runner exit {rc})")
    for line in result.reason:
        print(f"kselftest: {line}")
    return result.status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
