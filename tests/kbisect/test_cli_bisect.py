"""`kbisect bisect` on bad input: one line and exit 2, against a real local dev server."""

import asyncio
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.temporal_server import temporal_binary
from kbisect.settings import Settings
from kbisect.workers.activities import BuildActivities
from kbisect.workflows.bisect_workflow import SEARCH_ATTRIBUTES, BisectWorkflow, sandbox_runner

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()), search_attributes=list(SEARCH_ATTRIBUTES)
    ) as env:
        yield env


async def _kbisect(
    env: WorkflowEnvironment, *args: str, command: str = "bisect"
) -> tuple[int, str]:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    environ = {
        **os.environ,
        "KBISECT_TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "KBISECT_CONTROL_QUEUE": queue,
        "KBISECT_BUILD_QUEUE": queue,
        "KBISECT_VM_QUEUE": queue,
    }
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[BisectWorkflow],
        activities=[BuildActivities(Settings.from_env(), KernelBuilder()).validate_job],
        workflow_runner=sandbox_runner(),
        activity_executor=ThreadPoolExecutor(2),
    ):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kbisect.cli",
            command,
            *(["--no-start"] if command == "bisect" else []),
            *args,
            env=environ,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    lines = [line for line in err.decode().splitlines() if line.startswith("kbisect: error")]
    assert len(lines) == 1, err.decode()
    return proc.returncode or 0, lines[0]


@pytest.fixture
def lab(tmp_path: Path, tiny_tarball: Path) -> Path:
    create_lab(tmp_path / "lab", LabOptions(commits=6, seed=3))
    return tmp_path / "lab"


@pytest.mark.parametrize(
    ("good", "bad", "extra", "expected"),
    [
        ("lab-bad", "lab-good", [], "is not an ancestor of bad"),  # and it suggests --mode fix
        ("lab-good", "lab-bad", ["--mode", "fix"], "must be an ancestor of good"),
        ("lab-good", "lab-bad", ["--testcase", "no-such-test"], "unknown testcase 'no-such-test'"),
    ],
)
async def test_a_bad_job_ends_at_once_with_one_line(
    env: WorkflowEnvironment, lab: Path, good: str, bad: str, extra: list[str], expected: str
) -> None:
    args = ["--repo", str(lab), "--good", good, "--bad", bad, "--testcase", "nvme-snapshot-read"]
    code, line = await _kbisect(env, *args, *extra)  # a later --testcase wins
    assert code == 2 and expected in line
    # The job has failed: resuming it says so in one line.
    found = re.search(r"job (\S+) failed: ", line)
    assert found, line
    job = found.group(1)
    code, line = await _kbisect(env, job, command="resume")
    assert code == 2 and f"job {job} has ended (failed): nothing to resume" in line


async def test_unknown_revision_fails_before_a_job_starts(
    env: WorkflowEnvironment, lab: Path
) -> None:
    before = await _jobs(env)
    code, line = await _kbisect(
        env,
        "--repo",
        str(lab),
        "--good",
        "v9.9",
        "--bad",
        "lab-bad",
        "--testcase",
        "nvme-snapshot-read",
    )
    assert code == 2 and "unknown revision 'v9.9'" in line
    assert await _jobs(env) == before  # no job was started


async def _jobs(env: WorkflowEnvironment) -> int:
    return len([wf async for wf in env.client.list_workflows()])
