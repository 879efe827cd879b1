"""A finished bisection's answer in parts of their own: the commit (`hash ("subject")`,
author, date), the verdict, the effect (the endpoints' levels, the change with its
interval, boots a side), the verification and the certainty. The page, the report, the
doors and `report --json` show these; the one-line `found: ...` stays the job's message
(piped output, the README's line)."""

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kbisect.contract import Mode
from kbisect.errors import KbisectError
from kbisect.infra.git import Git
from kbisect.model import Commit
from kbisect.words import boots_a_side
from kbisect.workflows.bisect_types import BisectResult, EndpointChange


def answer_word(mode: str) -> str:
    """What the named commit is called in an answer's line."""
    return "fixed by" if mode == Mode.FIX else "first bad commit"


@dataclass(frozen=True)
class Answer:
    verdict: str  # the job's status: found, ambiguous, no-difference...
    word: str  # what the commit is: "first bad commit", "fixed by"
    commit: str | None
    subject: str = ""
    author: str = ""  # "" where the tree is not readable from here
    date: str = ""
    effect: str = ""  # the change in words (below)
    change: EndpointChange | None = None  # ... in numbers
    verification: str = ""  # confirmed, contradicted, inconclusive ("" not verified)
    verification_text: str = ""
    certainty: float | None = None  # P(every verdict that named the commit is right)

    @property
    def named(self) -> str:
        """The kernel's habit: `1966bd061a65 ("NVMe: Allow request merges")`."""
        if not self.commit:
            return ""
        return f'{self.commit[:12]} ("{self.subject}")' if self.subject else self.commit[:12]

    @property
    def certainty_text(self) -> str:
        if self.certainty is None:
            return ""
        return f"{self.certainty:.1%} that every verdict naming this commit is right"

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"named": self.named, "certainty_text": self.certainty_text}


def commit_info(repo: str, commit: str) -> Commit | None:
    """The commit as the job's tree has it, or None where that tree is not readable here."""
    try:
        return Git(Path(repo)).commit_info(commit)
    except KbisectError:
        return None


def level(value: float | None, unit: str, pass_fail: bool) -> str:
    """One side's level: '512 sectors', '3.2 µs/op', or a pass/fail side's '40% failed'."""
    if value is None:
        return "?"
    if pass_fail:
        return f"{value:.0%} failed"
    return f"{value:g} {unit}".rstrip()


def effect_words(change: EndpointChange, metric: str, unit: str, pass_fail: bool) -> str:
    """'avg_read_sectors 512 → 8 sectors: -98.4% (no noise; 2 boots a side)': the sides
    old → new, the interval when the boots have one."""
    if pass_fail:
        sides = f"{level(change.old, unit, True)} → {level(change.new, unit, True)}"
        return f"{sides} ({boots_a_side(change.boots_old, change.boots_new)})"
    sides = f"{level(change.old, '', False)} → {level(change.new, unit, False)}"
    if change.low is None or change.high is None:
        spread = "too few boots for an interval"
    elif change.low == change.high:
        spread = "no noise"
    else:
        spread = f"95% interval {change.low:+.1%} to {change.high:+.1%}"
    boots = boots_a_side(change.boots_old, change.boots_new)
    return f"{metric} {sides}: {change.value:+.1%} ({spread}; {boots})".lstrip()


def answer_of(result: BisectResult) -> Answer:
    """The answer's parts; the author and date read from the job's tree where it is
    readable here (a report read on another host leaves them out)."""
    culprit = result.culprit
    info = commit_info(result.repo, culprit) if culprit else None
    change = result.change
    effect = (
        effect_words(change, result.metric or "score", result.unit, result.pass_fail)
        if change is not None
        else result.effect
    )
    v = result.verification
    return Answer(
        verdict=result.status,
        word=answer_word(result.mode) if culprit else "",
        commit=culprit,
        subject=info.subject if info else result.subjects.get(culprit or "", ""),
        author=info.author if info else "",
        date=info.date if info else "",
        effect=effect,
        change=change,
        verification=v.status if v else "",
        verification_text=f"{v.kind} of {v.change[:12]}: {v.message}" if v else "",
        certainty=result.confidence if culprit else None,
    )


def answer_lines(a: Answer) -> list[str]:
    """The answer as plain lines, a part each (stdout, a door's outcome): the commit
    whole with its subject, then who and when, the effect, the verification and the
    certainty."""
    if not a.commit:
        return []
    subject = f' ("{a.subject}")' if a.subject else ""
    lines = [f"{a.word}: {a.commit}{subject}"]  # the whole hash: scripts take it
    if a.author:
        lines.append(f"author: {a.author}, {a.date}")
    if a.effect:
        lines.append(f"effect: {a.effect}")
    if a.verification:
        lines.append(f"verification: {a.verification}, {a.verification_text}")
    if a.certainty_text:
        lines.append(f"certainty: {a.certainty_text}")
    return lines
