"""The README's main job for real, piped, on the shared lab: dev server and worker
processes, lab kernels, QEMU. It prints every line the README quotes (its progress on
stderr, its answer on stdout), and survives a SIGKILL of the worker mid-build after steps
have finished: nothing finished is redone. (A server killed mid-job: the soak test.)"""

import asyncio
import contextlib
import json
import math
import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from benchmarks.nginx import free_port
from kbisect import settings
from kbisect.infra import temporal_server
from kbisect.infra.git import Git
from kbisect.workflows.investigation_types import StageName, stage_id
from tests.e2e.service import (
    KBISECT,
    recache,
    service_env,
    start_worker,
    uncache,
    watch_job,
)

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"
TESTCASE = "nvme-snapshot-read"


def quoted_blocks(text: str) -> tuple[list[str], list[str]]:
    """The README's piped progress lines and its answer lines (the indented blocks after
    'one plain line per event' and 'the answer, on stdout')."""

    def block_after(marker: str) -> list[str]:
        rest = text[text.index(marker) :].splitlines()[1:]
        start = next(i for i, line in enumerate(rest) if line.startswith("    "))
        lines = []
        for line in rest[start:]:
            if not line.startswith("    "):
                break
            lines.append(line.strip())
        return lines

    return block_after("one plain line per event"), block_after("the answer, on stdout")


def pattern(quoted: str) -> "re.Pattern[str]":
    """A quoted line as a regex: <placeholder> is some text, '...' any text."""
    parts = re.split(r"(<[^>]+>|\.\.\.)", quoted)
    return re.compile(
        "".join(".+?" if p.startswith("<") else ".*" if p == "..." else re.escape(p) for p in parts)
    )


def test_quoted_lines_become_patterns() -> None:
    assert pattern("boot 1: <commit> boot 1: x <value>").fullmatch("boot 1: abc boot 1: x 8")
    assert not pattern("step 1: <commit> good (endpoint)").fullmatch("step 1: abc good")
    progress, answer = quoted_blocks(README.read_text())
    assert progress[0] == "validating" and any(line.startswith("found:") for line in progress)
    assert answer and answer[0].startswith("first bad commit:")


def _wait_for(cond: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(1)


def _compiling_under(pid: int) -> bool:
    """Whether a make runs under process `pid` (a child of it, or deeper): this worker's
    own build, whatever the other e2e worker builds in the lab's slots."""
    parent, name = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # it ended meanwhile
        proc = int(stat.parent.name)
        name[proc] = text[text.index("(") + 1 : text.rindex(")")]
        parent[proc] = int(text[text.rindex(")") + 2 :].split()[1])
    for proc in (p for p, n in name.items() if n == "make"):
        while proc > 1:
            proc = parent.get(proc, 0)
            if proc == pid:
                return True
    return False


def _build_history(address: str, job_id: str) -> tuple[Counter[str], int]:
    """How often each commit's build was scheduled (a retry is not a new schedule), and how
    many build attempts were retries (a worker died under them)."""

    async def go() -> tuple[Counter[str], int]:
        client = await Client.connect(address)
        history = await client.get_workflow_handle(job_id).fetch_history()
        scheduled: Counter[str] = Counter()
        build_events: set[int] = set()
        retries = 0
        for event in history.events:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "build_kernel":
                scheduled[json.loads(attrs.input.payloads[0].data)["commit"]] += 1
                build_events.add(event.event_id)
            started = event.activity_task_started_event_attributes
            if started.scheduled_event_id in build_events and started.attempt > 1:
                retries += 1
        return scheduled, retries

    return asyncio.run(go())


def _steps(address: str, job_id: str) -> set[tuple[str, str]]:
    """The job's recorded steps (a finished verdict each) as (commit, verdict), from its
    progress query."""

    async def go() -> set[tuple[str, str]]:
        client = await Client.connect(address)
        try:
            progress = await client.get_workflow_handle(job_id).query("progress")
        except RPCError:  # the investigation has not started its bisection yet
            return set()
        return {(step["commit"], step["verdict"]) for step in progress["steps"]}

    return asyncio.run(go())


def _job_id(err: Path) -> str:
    ids = [line.split()[1] for line in err.read_text().splitlines() if line.startswith("job inv-")]
    return ids[0] if ids else ""


@pytest.mark.lab_kernels_alone
def test_the_readme_job_prints_every_line_it_quotes_through_a_worker_kill(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    # Every kernel the job may build is built for real until the kill (the e2e cache would
    # hold them all, the lab being the same every run): lab-good's build is a step long
    # enough for the README's "building" line, the later ones builds to kill; after it,
    # the kernels no build began are cache hits again.
    between = Git(lab).run("rev-list", "--ancestry-path", "lab-good..lab-bad^").split()
    held = uncache(lab, ["lab-good", *between], TESTCASE)
    port, ui_port = free_port(), free_port()
    server = temporal_server.start(
        port=port, ui_port=ui_port, db=tmp_path / "t.db", log=tmp_path / "server.log"
    )
    env = {**os.environ, **service_env(tmp_path, port, ui_port, uuid.uuid4().hex[:8])}
    worker = start_worker(env, tmp_path / "worker.log")
    out, err = tmp_path / "cli.out", tmp_path / "cli.err"
    args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    args += ["--testcase", TESTCASE, "--repetitions", "1", "--no-start"]
    try:
        with open(out, "w") as stdout, open(err, "w") as stderr:
            cli = subprocess.Popen([*KBISECT, "bisect", *args], env=env, stdout=stdout,
                                   stderr=stderr, stdin=subprocess.DEVNULL)  # fmt: skip
        _wait_for(lambda: _job_id(err), 300, "the job id")
        job_id = _job_id(err)
        bisection = stage_id(job_id, StageName.BISECT)
        # Once steps have finished (the endpoints are judged), kill the worker while it is
        # really compiling (not on a cache hit); the CLI goes on following the job.
        address = f"127.0.0.1:{port}"
        _wait_for(lambda: len(_steps(address, bisection)) >= 2, 1500, "the endpoints judged")
        _wait_for(lambda: _compiling_under(worker.pid), 1500, "a real build")
        time.sleep(3)
        done_before_kill = _steps(address, bisection)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        worker = start_worker(env, tmp_path / "worker.log")
        # The builds that prove it are done: the later ones may be cache hits again.
        begun = {Git(lab).tree_of(c) for c in _build_history(address, bisection)[0]}
        print(f"{recache(held, begun)} kernels back in the cache after the kill")
        assert cli.wait(timeout=1700) == 0, err.read_text()[-2000:] + out.read_text()
        result = watch_job(env, job_id)
        builds, retries = _build_history(address, bisection)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may be the killed one
            os.killpg(worker.pid, signal.SIGKILL)
        server.terminate()
        server.wait(timeout=30)

    progress, answer = quoted_blocks(README.read_text())
    for quoted, printed in ((progress, err.read_text()), (answer, out.read_text())):
        lines = printed.splitlines()
        missing = [q for q in quoted if not any(pattern(q).fullmatch(line) for line in lines)]
        assert not missing, (missing, printed[-4000:])
    culprit = truth["culprit"]
    assert f"first bad commit: {culprit}" in out.read_text()
    # The lab breaks commits 2 (build) and 14 (boot) and puts the culprit at 4-11, so
    # neither the culprit nor its parent is ever skipped: the answer is one commit.
    assert result["culprit"] == culprit, result["message"]
    # The culprit reverted on lab-bad, built and booted for real, reads like lab-good.
    verification = result["verification"]
    assert verification["kind"] == "revert" and verification["change"] == culprit
    assert verification["status"] == "confirmed", verification
    assert verification["position"] < 0.5
    assert builds[verification["commit"]] == 1
    # The steps finished before the kill stand, with their verdicts, and were not redone.
    finished = {(s["commit"], s["verdict"]) for s in result["steps"]}
    assert done_before_kill <= finished, (done_before_kill, finished)
    assert max(builds.values()) == 1, builds  # no finished step redone after the kill
    assert retries >= 1  # the kill landed in a build, which another worker finished
    commits = int(str(truth["commits"]))
    # Builds besides the two endpoints and the verification commit: a bisection's worth.
    assert sum(builds.values()) - 2 - 1 <= math.ceil(math.log2(commits)) + 2
    tested = [s["commit"] for s in result["steps"]]
    assert len(tested) == len(set(tested))
    # Lab fillers edit files the config does not compile, or only comments: judged from
    # the kernel they share with a judged commit, never booted; the inert never built.
    same = [s for s in result["steps"] if s["source"] == "same-kernel"]
    assert same and all(s["boots"] == 0 for s in same), same
    inert = [s["commit"] for s in same if s["note"].startswith("touches no file")]
    assert inert and not any(builds.get(c) for c in inert), (inert, builds)
    # Each names the judged commit before it whose verdict it took, or none, and then
    # says its kernel was never booted: never a commit absent from the table.
    steps = result["steps"]
    for i, s in enumerate(steps):
        if s["source"] == "same-kernel":
            before = {t["commit"] for t in steps[:i] if t["source"] != "same-kernel"}
            assert s["same_as"] in before if s["same_as"] else "never booted" in s["note"], s
    # The answer in numbers and in parts; each boot's console and each kernel's build log
    # where the results pages serve them from (this host's cache)
    change, answer = result["change"], result["answer"]
    assert change["old"] > change["new"] and change["value"] < 0 and change["boots_new"] >= 1
    assert (answer["commit"], answer["verification"]) == (culprit, "confirmed"), answer
    booted = [s for s in steps if s["boots"]]
    assert booted and all(len(s["runs"]) == s["boots"] for s in booted), booted
    cache = settings.cache_dir()
    assert all((cache / r / "console.log").is_file() for s in booted for r in s["runs"])
    assert all((cache / s["build_log"]).is_file() for s in booted), booted
    print(f"bisection: {len(tested)} steps, {sum(builds.values())} builds; culprit {culprit}")
