"""`kbisect bisect` explains a culprit it names on a timing metric (and on request only
for a counter or a pass/fail job); `kbisect explain`'s bad input: one line."""

import argparse
import asyncio
import json
import math

import pytest
from temporalio.client import WorkflowExecutionStatus

from kbisect.cli.explain import show_result
from kbisect.contract import EXPLAIN_MAX_BOOTS
from kbisect.jobs import explain_job
from kbisect.main import main
from kbisect.reports import explain_report
from kbisect.workflows.bisect_types import BisectResult
from kbisect.workflows.explain_types import AlignmentCheck, AlignmentWord, ExplainResult


@pytest.mark.parametrize(
    ("testcase", "metric", "asked", "explained"),
    [
        ("nvme-snapshot-read", "throughput", None, True),  # a timing: by default
        ("nvme-snapshot-read", "avg_read_sectors", None, False),  # a counter: on request
        ("nvme-snapshot-read", "avg_read_sectors", True, True),
        ("nvme-snapshot-read", "throughput", False, False),  # --no-explain
        ("boots", None, None, False),  # pass/fail: its bad boot is the answer
    ],
)
def test_the_investigation_explains_a_timing_culprit_and_a_counter_on_request(
    testcase: str, metric: str | None, asked: bool | None, explained: bool
) -> None:
    from kbisect.jobs.investigation import _explained

    assert _explained(asked, testcase, metric) is explained


def test_explaining_a_pass_fail_job_on_request_is_one_line() -> None:
    from kbisect.errors import UserError
    from kbisect.jobs.investigation import _explained

    with pytest.raises(UserError, match="is pass/fail: explain compares a metric's scores"):
        _explained(True, "boots", None)


def test_the_explain_stage_asks_about_the_culprit_against_its_parent() -> None:
    from kbisect.contract import Fixup
    from kbisect.workflows.bisect_types import BisectRequest
    from kbisect.workflows.investigation_types import explain_id, explain_request

    result = BisectResult(
        "found", "regression", "nvme-snapshot-read", "/lab", ["a" * 40], "b" * 40, "c" * 40,
        ["c" * 40], [], "m", metric="throughput", profile="fast",
    )  # fmt: skip
    fixup = Fixup("fix.diff", "/cache/patches/x.patch")
    asked = BisectRequest("/lab", ["a" * 40], "b" * 40, "nvme-snapshot-read",
                          config="/cache/configs/x.config", fixups=[fixup])  # fmt: skip
    req = explain_request(result, "inv-x-bisect", asked)
    assert explain_id("inv-x-bisect") == "inv-x-bisect-explain"
    assert (req.culprit, req.parent) == ("c" * 40, "c" * 40 + "^")
    assert (req.job, req.metric, req.profile) == ("inv-x-bisect", "throughput", "fast")
    assert req.config == "/cache/configs/x.config"  # the job's own kernel config
    assert req.fixups == [fixup]  # and its fixups: the culprit builds as it did
    assert explain_request(result, "inv-x-bisect", None).fixups == []


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
