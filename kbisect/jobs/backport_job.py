"""A bisection's backport job, for every door: its id, the request for its change and a
target, and what has come of it. The CLI (`kbisect backport`) and the chat door
(`backport JOB target=REV`) share it."""

import asyncio
from pathlib import Path

from kbisect.builders.backport_found import change_to_take
from kbisect.contract import BACKPORT_SUFFIX, DEFAULT_SWEEP_BOOTS, Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs.client import JobClient
from kbisect.settings import Settings
from kbisect.workflows.backport_types import BackportRequest
from kbisect.workflows.investigation_types import BackportChange, backport_request
from kbisect.workflows.investigation_types import backport_id as backport_id  # its doors'


def is_backport(job_id: str) -> bool:
    """Whether the id is a backport job's, by its form (the server says for sure)."""
    return f"{BACKPORT_SUFFIX}-" in job_id


def from_tree(settings: Settings, repo: Path, tree: str, rev: str) -> str:
    """A revision of a named tree ('kbisect tree add') as a full hash in the job's
    repository: the tree is fetched, then its branches and tags are copied under
    refs/kbisect/targets/NAME/ there (the user's own refs untouched)."""
    from kbisect.builders.trees import Trees

    mirror = Trees(settings).fetch(tree)
    if not rev and mirror.branch is None:
        raise UserError(f"tree {tree} follows every branch: give --target BRANCH (or a tag)")
    full = Git(mirror.path).resolve(rev or f"refs/heads/{mirror.branch}")
    into = f"refs/kbisect/targets/{tree}"
    Git(repo).run("fetch", "--quiet", "--no-tags", str(mirror.path),
                  f"+refs/heads/*:{into}/heads/*", f"+refs/tags/*:{into}/tags/*")  # fmt: skip
    return full


async def request_for(
    client: JobClient,
    job: str,
    target: str,
    boots: int | None = None,
    followups: bool = False,
    tree: str | None = None,
) -> BackportRequest:
    """The backport request of a finished bisection to `target` (a revision of its
    repository, or of the named tree, resolved here): in fix mode its fix; in regression
    mode the commit whose `Fixes:` names its culprit, or else the culprit reverted.
    UserError: the job named no commit, or the target is no revision there."""
    result = await client.result(job)
    if result.culprit is None:
        raise UserError(
            f"job {job} named no commit ({result.status}): there is nothing to backport"
        )
    req = await client.job_request(job)
    culprit = result.culprit

    def in_the_repository() -> BackportRequest:  # git: off the caller's event loop
        git = Git(Path(result.repo))
        git.check_repo()
        name = target
        if tree is not None:
            full = from_tree(client.settings, Path(result.repo), tree, target)
            name = f"{tree} {target}" if target else tree
        else:
            full = git.resolve(target)
        change, revert = change_to_take(result.repo, culprit, result.mode == Mode.REGRESSION)
        return backport_request(
            result, job, BackportChange(change, revert), (full, name),
            boots or DEFAULT_SWEEP_BOOTS, req, followups,
        )  # fmt: skip

    return await asyncio.to_thread(in_the_repository)
