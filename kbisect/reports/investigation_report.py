"""An investigation's answer, one report: the stages in order (check, phases, bisection with
its verification, Why, backport), each in its own report's words, then the SRU draft.
Pure: the stage jobs' answers are read by the caller (kbisect.jobs.investigation)."""

from dataclasses import asdict, dataclass, field
from typing import Any

from kbisect.errors import KbisectError
from kbisect.reports import backport_report, explain_report, job_report, sweep_report
from kbisect.reports.lines import md_lines, md_text
from kbisect.workflows.backport_types import BackportResult
from kbisect.workflows.bisect_types import BisectResult
from kbisect.workflows.explain_types import ExplainResult
from kbisect.workflows.investigation_types import InvestigationResult, Stage, StageName
from kbisect.workflows.sweep_types import SweepResult

Answer = SweepResult | BisectResult | ExplainResult | BackportResult


@dataclass
class Answers:
    """An ended investigation and what each of its stage jobs answered (by job id; a failed
    stage has none)."""

    result: InvestigationResult
    by_job: dict[str, Answer] = field(default_factory=dict)

    def of(self, name: str) -> tuple[Stage, Answer] | None:
        stage = self.result.stage(name)
        if stage is None or stage.job not in self.by_job:
            return None
        return stage, self.by_job[stage.job]


def _one_down(lines: list[str]) -> list[str]:
    """A report's sections one level down (## -> ###), fenced code left as it is."""
    fence, out = "", []
    for line in lines:
        if fence and line.strip() == fence:
            fence = ""
        elif not fence and line.startswith("```"):
            fence = line[: len(line) - len(line.lstrip("`"))]
        out.append(f"#{line}" if not fence and line.startswith("## ") else line)
    return out


def stage_line(s: Stage) -> str:
    return f"{s.name}: {s.state} ({s.job or 'no job'})" + (f": {s.line}" if s.line else "")


def markdown(job_id: str, a: Answers, sru: str = "") -> str:
    """The whole answer as markdown; `sru`: the SRU draft, made by the caller (it reads the
    repository)."""
    r = a.result
    lines = [
        f"# kbisect {md_text(job_id)}: {md_text(r.testcase)}",
        "",
        f"**{md_text(r.status)}**: {md_text(r.message)}",
        "",
        "## Stages",
        "",
        *(f"- {md_text(stage_line(s))}" for s in r.stages),
    ]
    for s in r.stages:
        answer = a.by_job.get(s.job)
        if answer is None:
            continue
        lines += ["", f"## {s.name.capitalize()}: {md_text(s.job)}", ""]
        if isinstance(answer, SweepResult):
            lines.append(sweep_report.markdown(answer))
        elif isinstance(answer, BisectResult):  # its title goes, its sections go one down
            body = job_report.markdown(answer, s.job).split("\n", 1)[1].strip("\n")
            lines += _one_down(body.split("\n"))
        elif isinstance(answer, ExplainResult):
            lines.append(md_lines("\n".join(explain_report.outcome_lines(answer))))
        else:
            lines.append(md_lines("\n".join(backport_report.outcome_lines(answer))))
    if sru:
        lines += ["", "## SRU draft", "", "```", sru.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def to_json(job_id: str, a: Answers) -> dict[str, Any]:
    """The investigation's stages, each with its job's answer as that job's report gives it."""
    stages = []
    for s in a.result.stages:
        entry: dict[str, Any] = asdict(s)
        answer = a.by_job.get(s.job)
        if isinstance(answer, SweepResult):
            entry["answer"] = sweep_report.to_json(answer, s.job)
        elif isinstance(answer, BisectResult):
            entry["answer"] = job_report.to_json(answer)
        elif isinstance(answer, ExplainResult):
            entry["answer"] = explain_report.to_json(answer, s.job)
        elif isinstance(answer, BackportResult):
            entry["answer"] = backport_report.to_json(answer, s.job)
        stages.append(entry)
    r = a.result
    return {
        "id": job_id, "kind": "investigation", "status": r.status, "message": r.message,
        "culprit": r.culprit, "bisection": r.bisection, "testcase": r.testcase,
        "stages": stages,
    }  # fmt: skip


def sru_draft(a: Answers, job_id: str) -> str:
    """The SRU note of the bisection that named the culprit, with explain's Why and a
    verified backport's series and figures ("" with no culprit)."""
    from kbisect.reports.sru_note import sru_note

    named = a.of(StageName.BISECT) or a.of(StageName.KERNELS)
    if named is None or not isinstance(named[1], BisectResult) or not named[1].culprit:
        return ""
    why = a.of(StageName.EXPLAIN)
    backport = a.of(StageName.BACKPORT)
    try:
        return sru_note(
            named[1], named[0].job,
            why=why[1].why if why and isinstance(why[1], ExplainResult) else None,
            backport=backport[1] if backport and isinstance(backport[1], BackportResult) else None,
        )  # fmt: skip
    except KbisectError as err:
        return f"(no SRU draft: {err})"
