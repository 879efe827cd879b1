"""An investigation's request from what a door was asked: the same checks and one-line
errors for the CLI (`kbisect bisect`), chat and GitLab, before anything starts. The chain
itself runs in the service (workflows.investigation_workflow): the door only starts it and
follows it."""

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.contract import BACKPORT_WORKFLOW, EXPLAIN_WORKFLOW, SWEEP_WORKFLOW, WORKFLOW
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs import cross_tree, kernel_phase
from kbisect.jobs.client import JobClient
from kbisect.jobs.request import JobOptions, checked_request
from kbisect.reports.investigation_report import Answer, Answers
from kbisect.settings import Settings
from kbisect.workflows.investigation_types import InvestigationRequest, StageState


@dataclass(frozen=True)
class Chain:
    """The stages asked for beyond the bisection itself."""

    cross_tree: bool = False  # the distro endpoint is checked against the merge base first
    kernels: str = ""  # K1,K2,... prebuilt kernels bisected first ("": none)
    # explain the culprit once named: None a timing's only (a counter's or pass/fail's
    # report shows what changed), True a counter's too, False none
    explain: bool | None = None
    target: str = ""  # a revision the change is backported to once named ("": none)


def plan(opts: JobOptions, chain: Chain, settings: Settings) -> tuple[InvestigationRequest, str]:
    """The request, and a note for the user ("" or why --cross-tree changes nothing)."""
    if chain.cross_tree and chain.kernels:
        raise UserError("--cross-tree bisects revisions of one repository: drop --kernels")
    if opts.fixups and chain.kernels:
        raise UserError("--fixup patches the commits a bisection builds: drop --kernels")
    if not chain.kernels and (not opts.good or not opts.bad):
        raise UserError("give --good REV and --bad REV (or --kernels K1,K2,... of prebuilt ones)")
    phase = kernel_phase.plan(chain.kernels, opts, settings) if chain.kernels else None
    req = checked_request(phase.options if phase else opts, settings)
    check, said = None, ""
    if chain.cross_tree:
        check = cross_tree.find(Git(Path(req.repo)), req)
        if check is None:
            said = "--cross-tree: the endpoints are on one line already; bisecting them as they are"
        else:
            req = cross_tree.on_base(req, check)
    target = ""
    if chain.target:
        if phase is not None and phase.phase.between is None:
            raise UserError("--target needs the commits bisected: map each kernel to its K=REV")
        source = phase.phase.between.repo if phase and phase.phase.between else req.repo
        target = Git(Path(source)).resolve(chain.target)
    return (
        InvestigationRequest(
            bisection=req,
            check=check,
            kernels=phase.phase if phase else None,
            explain=_explained(chain.explain, req.testcase, req.metric),
            target=target,
            target_name=chain.target,
        ),
        said,
    )


def _explained(asked: bool | None, testcase: str, metric: str | None) -> bool:
    """Whether the chain explains its culprit: never a pass/fail job's (its bad boot's
    console is the answer); a timing's unless asked not to; a counter's when asked."""
    from kbisect.testcases import manifest as manifests

    manifest = manifests.load(testcase)
    if asked is False or manifest.pass_fail:
        if asked:
            raise UserError(f"{testcase} is pass/fail: explain compares a metric's scores")
        return False
    found = manifest.metrics.get(metric or manifest.primary)
    return asked is True or (found is not None and not found.exact)


async def answers(client: JobClient, job_id: str) -> Answers:
    """An ended investigation and each of its stage jobs' answers (a failed stage: none)."""
    result = await client.investigation_result(job_id)
    read: dict[str, Callable[[str], Awaitable[Answer]]] = {
        SWEEP_WORKFLOW: client.sweep_result,
        WORKFLOW: client.result,
        EXPLAIN_WORKFLOW: client.explain_result,
        BACKPORT_WORKFLOW: client.backport_result,
    }
    found = Answers(result)
    for stage in result.stages:
        if stage.state in (StageState.DONE, StageState.REFUSED) and stage.kind in read:
            with contextlib.suppress(UserError):  # a stage job since deleted
                found.by_job[stage.job] = await read[stage.kind](stage.job)
    return found
