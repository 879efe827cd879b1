"""A job's result and steps in words, as whole plain lines: the CLI, the chat and GitLab
doors and the reports say them the same way."""

import re
from collections.abc import Sequence
from pathlib import Path

from kbisect.builders.kernel_list import builds_line
from kbisect.contract import Mode
from kbisect.reports.answer import answer_lines, answer_of
from kbisect.testcases.manifest import PASSED
from kbisect.workflows.bisect_types import BisectResult, Step


def one_line(text: str) -> str:
    return " ".join(text.split())


# Markdown's inline syntax (images and links, autolinks, emphasis, code, entities, table
# cells, GitLab's maths and strikethrough; a "_" between letters is none), and what starts
# a block at a line's start (a heading, a quote, a list, an underline): backslashed, which
# CommonMark shows as the character itself.
_MD_INLINE = re.compile(r"[\\`*\[\]<|&~$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_MD_LINE_START = re.compile(r"^(\d{1,9}(?=[.)])|)([-+=#>.)])")


def md_text(text: str) -> str:
    """A string from a repository or a guest (a subject, an author, a ref, a console line,
    a failure) as markdown that shows it as it is, on one line: never an image that the
    reader's browser fetches, a link or markup."""
    flat = " ".join(text.splitlines()).strip()
    return _MD_LINE_START.sub(r"\1\\\2", _MD_INLINE.sub(r"\\\g<0>", flat))


def md_lines(text: str) -> str:
    """Plain text (kbisect's lines, with others' words in them) as markdown that shows each
    line as it is, the line breaks kept: md_text line by line. A line's leading blanks go,
    so that none is read as indented code, which would show the escapes."""
    return "\n".join(md_text(line) for line in text.splitlines())


def backtick_fence(text: str, least: int = 1) -> str:
    """A CommonMark fence (of `least` backticks at least) longer than any run of backticks
    in text, which therefore cannot close it early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(least, longest + 1)


def md_code(text: str) -> list[str]:
    """Text as a fenced code block's lines, shown as it is (a guest's console)."""
    fence = backtick_fence(text, 3)
    return [fence, *text.splitlines(), fence]


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain table, columns aligned with two spaces, nothing cut."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    )


def pass_fail_counts(step: Step) -> tuple[int, int]:
    """A pass/fail step's good and bad boots."""
    passes = sum(1 for v in step.scores if v > 0)
    return passes, len(step.scores) - passes


def step_line(number: int, step: Step, metric: str) -> str:
    """e.g. 'step 3: 1966bd061a65 bad avg_read_sectors=8'."""
    text = f"step {number}: {step.commit[:12]} {step.verdict}"
    if step.value is not None and metric == PASSED:  # pass/fail boots
        failed = pass_fail_counts(step)[1]
        if len(step.scores) > 1:
            text += f" ({failed} of {len(step.scores)} boots failed)"
        else:
            text += " (passed)" if step.value > 0 else " (failed)"
    elif step.value is not None:
        text += f" {metric}={step.value:g}"
    if step.source != "test":
        text += f" ({step.source})"
    if step.note:
        text += f": {step.note}"
    return one_line(text)


def outcome_lines(result: BisectResult) -> list[str]:
    if result.culprit:
        builds = builds_line(Path(result.repo), result.culprit, Mode(result.mode))
        if builds:
            return [builds]
        lines = [one_line(line) for line in answer_lines(answer_of(result))]
        if result.bad_boot:
            b = result.bad_boot
            first = next((ln.strip() for ln in b.excerpt.splitlines() if ln.strip()), "")
            lines.append(one_line(f"bad boot of {b.commit[:12]} ({b.bad}): {first}"))
        return lines
    return [result.message] + [
        f"  candidate {c} {result.subjects.get(c, '')}".rstrip() for c in result.candidates
    ]
