"""`kbisect sweep`, `watch`, `report` and `status` on a sweep, as a user runs them: the
CLI in its own process, a real dev server, the real workflow and validation on a real
git lab; builds and boots are fakes that score lab-bad's kernel as the seed's bug."""

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.contract import (
    BUILD,
    TEST,
    BuildRequest,
    BuildResult,
    TestRequest,
    TestResult,
    TestStatus,
)
from kbisect.infra.git import Git
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.model import Artifact
from kbisect.settings import Settings
from kbisect.workers.activities import BuildActivities
from kbisect.workflows.bisect_workflow import sandbox_runner
from kbisect.workflows.sweep_types import CANNOT_TEST
from kbisect.workflows.sweep_workflow import SweepWorkflow
from tests.conftest import one_queue_env

pytestmark = pytest.mark.asyncio(loop_scope="module")
SLOW: set[str] = set()  # kernels that read 8-sector requests (the seed's bug)
BROKEN: set[str] = set()  # kernels that do not build
CANNOT = "kernel has module dm_snapshot neither built in nor in its modules"
CANNOT_RUN: set[str] = set()  # kernels whose boots cannot test, as the activity says so


@activity.defn(name=BUILD)
async def build(req: BuildRequest) -> BuildResult:
    if req.commit in BROKEN:
        return BuildResult(commit=req.commit, ok=False, error="x.c: error", log="/l")
    art = Artifact(req.commit, tree="t", config_hash="c", kernel="/k", config="/c", build_log="/l")
    return BuildResult(commit=req.commit, ok=True, artifact=art)


@activity.defn(name=TEST)
async def boot(req: TestRequest) -> TestResult:
    if req.commit in CANNOT_RUN:  # the activity's answer to a CannotTestError
        return TestResult(req.commit, TestStatus.TESTCASE_FAILED, error=f"{CANNOT_TEST}: {CANNOT}")
    value = 8.0 if req.commit in SLOW else 512.0
    return TestResult(req.commit, "ok", {req.metric: value}, [value] * 3, host="vm-a")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def service(
    env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, str]]:
    """The settings of a worker with the real workflow and validation, fake build and boot."""
    queue = f"q-{uuid.uuid4().hex[:6]}"
    environ = {**one_queue_env(env, queue), "KBISECT_DATA": str(tmp_path_factory.mktemp("data"))}
    validate = BuildActivities(Settings.from_env(), KernelBuilder()).validate_sweep
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[SweepWorkflow],
        activities=[validate, build, boot],
        workflow_runner=sandbox_runner(),
        activity_executor=ThreadPoolExecutor(2),
    ):
        yield environ


async def kbisect(environ: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbisect",
        *args,
        "--no-start",
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.fixture
def lab(tmp_path: Path, tiny_tarball: Path) -> Path:
    create_lab(tmp_path / "lab", LabOptions(commits=6, seed=3))
    SLOW.add(Git(tmp_path / "lab").resolve("lab-bad"))
    return tmp_path / "lab"


async def test_a_sweep_from_the_command_line_to_its_report(
    service: dict[str, str], lab: Path, tmp_path: Path
) -> None:
    plot = tmp_path / "sweep.png"
    series = ["lab-good", "lab-good", "lab-bad"]
    code, out, err = await kbisect(
        service,
        "sweep",
        "--repo",
        str(lab),
        *series,
        "--testcase",
        "nvme-snapshot-read",
        "--plot",
        str(plot),
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    pairs = [(p["old"]["position"], p["new"]["name"], p["verdict"]) for p in result["pairs"]]
    assert pairs == [(0, "lab-good", "same"), (1, "lab-bad", "changed")]
    assert result["pairs"][1]["direction"] == "worse"
    assert result["pairs"][1]["effect"] == pytest.approx(8 / 512 - 1)
    assert result["kernels"][2]["commit"] == Git(lab).resolve("lab-bad")  # a full hash
    assert result["boots"] == 3  # a counter that agrees: one boot a kernel
    assert plot.stat().st_size > 10_000
    # Piped progress: one plain line a boot, each kernel by the name it was given.
    boots = sorted(line for line in err.splitlines() if line.startswith("boot "))
    assert len(boots) == 3 and all("nvme-snapshot-read" in b for b in boots), err
    assert any(" lab-bad nvme-snapshot-read 8 on vm-a" in b for b in boots), boots
    # The same name twice: each entry numbered in the lines.
    assert sum(" lab-good #2 nvme-snapshot-read 512 on vm-a" in b for b in boots) == 1, boots
    job = result["id"]
    assert job.startswith("sweep-")

    # watch and report know it is a sweep; status lists it.
    code, watched, err = await kbisect(service, "watch", job, "--json")
    assert code == 0 and json.loads(watched)["pairs"] == result["pairs"], err
    code, report, err = await kbisect(service, "report", job)
    assert code == 0, err
    assert "| lab-good #2 -> lab-bad | nvme-snapshot-read avg_read_sectors |" in report
    assert "changed (worse)" in report and "1 of 2 pairs changed" in report
    code, listed, err = await kbisect(service, "status", "--json")
    assert code == 0, err
    assert job in [j["id"] for j in json.loads(listed)]


async def test_a_patch_on_a_kernel_of_the_series_makes_it_a_kernel_of_its_own(
    service: dict[str, str], lab: Path, tmp_path: Path
) -> None:
    """`sweep lab-bad lab-bad --patch 2=revert.diff`: the bad kernel against itself with a
    candidate fix (here the culprit's revert), built as a commit beside the user's."""
    truth = json.loads((lab.parent / "lab.truth.json").read_text())
    revert = tmp_path / "revert.diff"
    revert.write_bytes(Git(lab).patch(truth["culprit"], reverse=True))
    args = ["sweep", "--repo", str(lab), "lab-bad", "lab-bad", "--testcase", "nvme-snapshot-read"]
    code, out, err = await kbisect(service, *args, "--patch", f"2={revert}", "--json")
    assert code == 0, err
    result = json.loads(out)
    (pair,) = result["pairs"]
    assert (pair["new"]["name"], pair["verdict"]) == ("lab-bad + revert.diff", "changed"), pair
    assert pair["direction"] == "better"
    bad, patched = (k["commit"] for k in result["kernels"])
    assert bad == Git(lab).resolve("lab-bad") and Git(lab).resolve(f"{patched}^") == bad
    for wrong, says in ((f"3={revert}", "the series has 2 kernels"), ("2", "give N=FILE")):
        code, _, err = await kbisect(service, *args, "--patch", wrong)
        assert code == 2 and says in err and err.count("\n") == 1, err


async def test_a_sweep_with_a_pair_that_cannot_tell_says_so_and_exits_1(
    service: dict[str, str], lab: Path
) -> None:
    broken = Git(lab).resolve("lab-bad^")
    BROKEN.add(broken)
    code, out, err = await kbisect(
        service, "sweep", "--repo", str(lab), "lab-good", broken, "--testcase",
        "nvme-snapshot-read",
    )  # fmt: skip
    assert code == 1, err  # as a bisection that cannot decide
    lines = out.splitlines()
    assert "cannot tell" in lines[0] and "does not build" in lines[0], out
    assert lines[-1].startswith("0 of 1 pairs changed, 1 cannot tell; 0 boots of 2 kernels"), out


async def test_a_sweep_of_an_unknown_revision_is_one_line_before_a_job(
    service: dict[str, str], lab: Path
) -> None:
    code, out, err = await kbisect(
        service, "sweep", "--repo", str(lab), "lab-good", "v9.9", "--testcase", "sched-pipe"
    )
    assert code == 2 and out == ""
    assert err.strip().startswith("kbisect: error: ") and "v9.9" in err, err
    assert "job sweep-" not in err


async def test_a_kernel_that_cannot_run_the_testcase_says_why_and_the_rest_goes_on(
    service: dict[str, str], lab: Path
) -> None:
    """Not "Activity task failed", and not the whole sweep: that kernel's cell says
    "cannot test" with the boot's own reason; its pairs cannot tell; exit 1."""
    cannot = Git(lab).resolve("lab-bad~2")  # lab-bad^ does not build: an earlier test's
    CANNOT_RUN.add(cannot)
    code, out, err = await kbisect(
        service, "sweep", "--repo", str(lab), "lab-good", cannot, "lab-bad", "--testcase",
        "nvme-snapshot-read",
    )  # fmt: skip
    assert code == 1, err
    lines = out.splitlines()
    assert all(f"cannot test: {CANNOT}" in line for line in lines[:2]), out
    assert any(line.endswith(f"nvme-snapshot-read cannot test: {CANNOT}") for line in
               err.splitlines() if line.startswith("boot ")), err  # fmt: skip
    assert "Activity task failed" not in out + err
    assert lines[-1].startswith("0 of 2 pairs changed, 2 cannot tell"), out
