"""`kbisect bisect` explains a culprit it names on a timing metric (and on request only
for a counter or a pass/fail job); `kbisect explain`'s bad input: one line."""

import argparse
import asyncio
import json
import math
from dataclasses import dataclass, field

import pytest
from temporalio.client import WorkflowExecutionStatus

from kbisect.cli.explain import explain_after, show_result
from kbisect.contract import EXPLAIN_MAX_BOOTS
from kbisect.jobs import explain_job
from kbisect.main import main
from kbisect.reports import explain_report
from kbisect.workflows.bisect_types import BisectRequest, BisectResult
from kbisect.workflows.explain_types import (
    AlignmentCheck,
    AlignmentWord,
    ExplainRequest,
    ExplainResult,
)


@dataclass
class Client:
    """The JobClient calls explain_after makes, recorded."""

    result_: BisectResult
    started: list[tuple[str, ExplainRequest]] = field(default_factory=list)

    async def result(self, job_id: str) -> BisectResult:
        return self.result_

    async def job_request(self, job_id: str) -> BisectRequest:
        return BisectRequest("/lab", ["g"], "b", "t", config="/cache/configs/x.config")

    async def start_explain(self, req: ExplainRequest, job_id: str, by: str = "") -> str:
        self.started.append((job_id, req))
        return job_id


def _found(metric: str, pass_fail: bool = False) -> BisectResult:
    return BisectResult(
        "found", "regression", "nvme-snapshot-read", "/lab", ["a" * 40], "b" * 40, "c" * 40,
        ["c" * 40], [], "m", metric=metric, profile="fast", pass_fail=pass_fail,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("metric", "pass_fail", "explained"),
    [("throughput", False, True), ("avg_read_sectors", False, False), ("wall", True, False)],
)
def test_a_culprit_named_on_a_timing_metric_is_explained_at_the_end_of_its_job(
    metric: str, pass_fail: bool, explained: bool
) -> None:
    client = Client(_found(metric, pass_fail))
    args = argparse.Namespace(json=True)  # started, not followed
    asyncio.run(explain_after(client, "bisect-x-1", client.result_, args))  # type: ignore[arg-type]
    if not explained:
        assert client.started == []
        return
    [(job_id, req)] = client.started
    assert job_id == "bisect-x-1-explain"
    assert (req.culprit, req.parent) == ("c" * 40, "c" * 40 + "^")
    assert (req.job, req.metric, req.profile) == ("bisect-x-1", "throughput", "fast")
    assert req.config == "/cache/configs/x.config"  # the job's own kernel config


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["explain"], "give a bisection's job id, or --repo DIR --culprit REV"),
        (["explain", "bisect-x-1", "--culprit", "HEAD"], "not both"),
        (["explain", "bisect-x-1", "--boots", "1"], "--boots 1: give 2 to"),
        (
            ["explain", "bisect-x-1", "--boots", str(EXPLAIN_MAX_BOOTS + 1)],
            f"give 2 to {EXPLAIN_MAX_BOOTS} boots of each side",
        ),
        (
            ["explain", "--repo", "/nonexistent", "--culprit", "x", "--testcase", "t"],
            "/nonexistent",
        ),
    ],
)
def test_bad_input_is_one_line_before_any_service(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--no-start"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def _explained(alignment: AlignmentCheck | None, suggestion: str = "") -> ExplainResult:
    return ExplainResult(
        "explained", "/lab", "sched-pipe", "usecs_per_op", "us", "lower", "p" * 40, "c" * 40,
        ["parent subject", "culprit subject"], job="bisect-x-1", why=["stat system +88%"],
        boots=5, message="usecs_per_op +48.2%", alignment=alignment, suggestion=suggestion,
    )  # fmt: skip


def test_the_alignment_check_and_its_suggestion_are_lines_of_the_answer() -> None:
    check = AlignmentCheck(AlignmentWord.VANISHES, {}, 5, "vanishes: +1.0% (95% CI ...)")
    lines = explain_report.outcome_lines(_explained(check))
    assert "Alignment: vanishes: +1.0% (95% CI ...)" in lines
    lines = explain_report.outcome_lines(_explained(None, "a code-layout effect?"))
    assert lines[-1] == "Suggested: a code-layout effect?"
    assert not any(line.startswith("Alignment") for line in lines)
    data = explain_report.to_json(_explained(check), "bisect-x-1-explain")
    assert data["alignment"]["verdict"] == "vanishes" and data["suggestion"] == ""


@pytest.mark.parametrize(
    ("status", "alignment", "lacks"),
    [
        (WorkflowExecutionStatus.COMPLETED, None, True),  # explained again, with the check
        (
            WorkflowExecutionStatus.COMPLETED,
            AlignmentCheck(AlignmentWord.REMAINS, {}, 5, ""),
            False,
        ),
        (WorkflowExecutionStatus.RUNNING, None, False),  # followed as it is
    ],
)
def test_asking_for_the_alignment_check_explains_again_only_a_job_without_one(
    status: WorkflowExecutionStatus, alignment: AlignmentCheck | None, lacks: bool
) -> None:
    class Stored:
        async def status_of(self, job_id: str) -> WorkflowExecutionStatus:
            assert job_id == "bisect-x-1-explain"
            return status

        async def explain_result(self, job_id: str) -> ExplainResult:
            return _explained(alignment)

    got = asyncio.run(explain_job.lacks_alignment(Stored(), "bisect-x-1"))  # type: ignore[arg-type]
    assert got == lacks


def test_the_json_answer_is_strict_json_whatever_the_guest_left(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """json.dumps writes NaN and Infinity, which no JSON reader but Python's takes."""
    result = _explained(None)
    result.effect = {"change": math.nan, "low": -math.inf, "high": math.inf, "p": 0.5}
    result.comparison = {"read": 3, "changes": [{"name": "x", "p": math.nan}]}
    show_result(result, "bisect-x-1-explain", argparse.Namespace(json=True, flame=None))

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    data = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert data["effect"] == {"change": None, "low": None, "high": None, "p": 0.5}
    assert data["comparison"]["changes"] == [{"name": "x", "p": None}]
