"""`test JOB` in the doors: the patch a command answers (pasted below it, or in Matrix the
text or file it replies to) measured on the bisection's bad endpoint beside both endpoints,
one sweep the door follows; no patch, or one that does not apply, is one line; a GitLab door
that lets anyone in takes no patch (building one runs its code on the build hosts). The job
service is a stand-in; the patched commit is real git on a real lab."""

import asyncio
import dataclasses
from pathlib import Path

import pytest

from kbisect.doors.actions import execute
from kbisect.doors.gitlab import ANYONE_NO_PATCH
from kbisect.doors.grammar import parse
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.sweep_types import SweepRequest
from tests.chat.test_gitlab_door import PROJECT, Receiver, hook, receiver

__all__ = ["receiver"]  # the GitLab receiver fixture, used here by name


class PatchJobs:
    """The service as `test` sees it: one bisection's request, and the sweeps it starts."""

    def __init__(self, req: BisectRequest) -> None:
        self.req, self.sweeps = req, list[SweepRequest]()

    async def bisection_request(self, job_id: str) -> BisectRequest:
        return self.req

    def needs(self) -> list[object]:
        return []

    async def require_workers(self, *args: object) -> None:
        pass

    async def start_sweep(self, req: SweepRequest, by: str = "") -> str:
        self.sweeps.append(req)
        return f"sweep-{len(self.sweeps):08x}"

    def job_url(self, job_id: str) -> str:
        return f"http://ui/{job_id}"


@pytest.fixture
def lab(tmp_path: Path, tiny_tarball: Path) -> tuple[Path, dict[str, object]]:
    truth = create_lab(tmp_path / "lab", LabOptions(commits=6, seed=3))
    return tmp_path / "lab", truth


def _owns(_: str) -> bool:
    return True


def _claim() -> None:  # the door's quota lets it start
    pass


def _test(jobs: PatchJobs, patch: bytes | None) -> tuple[bool, str]:
    reply = asyncio.run(
        execute(parse("test bisect-x"), jobs, Settings.from_env(), _owns, claim=_claim, mail=patch)  # type: ignore[arg-type]
    )
    return reply.ok, reply.text


def test_the_grammar_takes_test_with_a_job_and_nothing_else() -> None:
    assert parse("test bisect-x").job == "bisect-x" and parse("test bisect-x").answers
    for text, says in (
        ("test", "write: test JOB"),
        ("test bisect-x boots=3", "takes no key=value"),
    ):
        with pytest.raises(UserError, match=says):
            parse(text)


def test_a_patch_is_measured_on_the_bad_end_beside_both_ends(
    lab: tuple[Path, dict[str, object]],
) -> None:
    repo, truth = lab
    g = Git(repo)
    good, bad = g.resolve("lab-good"), g.resolve("lab-bad")
    jobs = PatchJobs(BisectRequest(str(repo), [good], bad, "nvme-snapshot-read", config="/c"))
    revert = g.patch(str(truth["culprit"]), reverse=True).rstrip(b"\n")  # as a chat pastes it
    ok, text = _test(jobs, revert)
    assert ok and text.startswith("started sweep-00000001: http://ui/sweep-00000001\n"), text
    (sweep,) = jobs.sweeps
    assert sweep.kernels[0] == bad and sweep.kernels[2] == good
    assert g.resolve(f"{sweep.kernels[1]}^") == bad and g.resolve("lab-bad") == bad
    assert sweep.names == [f"bad {bad[:12]}", f"bad {bad[:12]} + the patch", f"good {good[:12]}"]
    assert (sweep.testcases, sweep.config, sweep.pass_fail_ok) == (
        ["nvme-snapshot-read"],
        "/c",
        True,
    )


def test_no_patch_or_one_that_does_not_apply_is_one_line(
    lab: tuple[Path, dict[str, object]],
) -> None:
    repo, truth = lab
    g = Git(repo)
    good = g.resolve("lab-good")
    jobs = PatchJobs(BisectRequest(str(repo), [good], good, "nvme-snapshot-read"))
    ok, text = _test(jobs, None)
    assert not ok and text.startswith("refused: test JOB measures a patch: send the command")
    # the culprit's revert on the good end (no culprit there) does not apply
    ok, text = _test(jobs, g.patch(str(truth["culprit"]), reverse=True))
    assert not ok and text.startswith(f"refused: the patch does not apply to {good} ("), text
    assert "\n" not in text and jobs.sweeps == []


@pytest.mark.asyncio
async def test_a_gitlab_door_that_lets_anyone_in_takes_no_patch(receiver: Receiver) -> None:
    receiver.door.config = dataclasses.replace(receiver.door.config, allowed=())
    await receiver.post(hook(91, "/kbisect test bisect-x\n--- a/x\n+++ b/x\n"))
    await receiver.settle()
    (reply,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")
    assert ANYONE_NO_PATCH in reply["body"], reply["body"]
    assert receiver.jobs.started == []
