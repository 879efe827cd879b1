"""`kbisect bisect` explains a culprit it names on a timing metric (and on request only
for a counter or a pass/fail job); `kbisect explain`'s bad input: one line."""

import argparse
import asyncio
from dataclasses import dataclass, field

import pytest

from kbisect.cli.explain import explain_after
from kbisect.contract import BisectRequest, BisectResult, ExplainRequest
from kbisect.main import main


@dataclass
class Client:
    """The JobClient calls explain_after makes, recorded."""

    result_: BisectResult
    started: list[tuple[str, ExplainRequest]] = field(default_factory=list)

    async def result(self, job_id: str) -> BisectResult:
        return self.result_

    async def job_request(self, job_id: str) -> BisectRequest:
        return BisectRequest("/lab", ["g"], "b", "t", config="/cache/configs/x.config")

    async def start_explain(self, req: ExplainRequest, job_id: str) -> str:
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
