"""`report JOB email=yes` in the doors: the grammar takes it, and the reply is the text of
`kbisect report JOB --email` (an investigation's: its bisection's), posted the doors' own
way: as it is in Matrix, a code block shown as it is in a GitLab note. The job service is a
stand-in here; the GitLab API is mocked as in test_gitlab_door."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from markdown_it import MarkdownIt
from temporalio.client import WorkflowExecutionStatus

from kbisect.contract import INVESTIGATION_WORKFLOW, WORKFLOW
from kbisect.doors.actions import Reply, execute
from kbisect.doors.gitlab import _markdown_of, _safe
from kbisect.doors.grammar import help_text, parse
from kbisect.doors.matrix import _quiet
from kbisect.errors import UserError
from kbisect.reports.email_report import mail
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult
from kbisect.workflows.explain_types import ExplainResult
from tests.chat.test_gitlab_door import BISECT, JOB, PROJECT, Receiver, hook, receiver
from tests.kbisect.test_email_report import WHY, _result

__all__ = ["receiver"]  # the GitLab receiver fixture, used here by name
INV = "inv-nvme-snapshot-read-0000000d"
BISECTION = f"{INV}-bisect"


def test_report_takes_email_yes_or_no_and_nothing_else() -> None:
    assert parse(f"report {INV} email=yes").switch("email")
    assert not parse(f"report {INV} email=no").switch("email")
    assert not parse(f"report {INV}").switch("email")
    with pytest.raises(UserError, match="write email=yes or email=no"):
        parse(f"report {INV} email=maybe")
    with pytest.raises(UserError, match="unknown key 'json' for report"):
        parse(f"report {INV} json=yes")
    with pytest.raises(UserError, match="email= given twice"):
        parse(f"report {INV} email=yes email=no")
    assert "report JOB [email=yes]" in help_text()
    with pytest.raises(UserError, match="write flaky=yes or flaky=no"):  # bisect's, as before
        parse("bisect tree=lab good=v1 bad=v2 testcase=t flaky=maybe")


class _Jobs:
    """A finished investigation whose bisection ended with an explain job."""

    def __init__(self, result: BisectResult) -> None:
        self.r = result

    async def describe(self, job_id: str) -> SimpleNamespace:
        return SimpleNamespace(workflow_type=INVESTIGATION_WORKFLOW if job_id == INV else WORKFLOW)

    async def bisection_of(self, job_id: str) -> str:
        return BISECTION if job_id == INV else job_id

    async def result(self, job_id: str) -> BisectResult:
        assert job_id == BISECTION
        return self.r

    async def status_of(self, job_id: str) -> WorkflowExecutionStatus:
        return WorkflowExecutionStatus.COMPLETED

    async def explain_result(self, job_id: str) -> ExplainResult:
        assert job_id == f"{BISECTION}-explain"
        return ExplainResult("explained", "", "t", "m", "", "higher", "p", "c", [], why=WHY)


@pytest.mark.parametrize("job", [INV, BISECTION])
async def test_the_reply_is_the_command_lines_mail(job: str, tmp_path: Path) -> None:
    jobs = _Jobs(_result(tmp_path))
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    reply = await execute(parse(f"report {job} email=yes"), jobs, settings, lambda j: True)  # type: ignore[arg-type]
    assert reply.ok and reply.verbatim and not reply.markdown and reply.job_id is None
    assert reply.text + "\n" == mail(jobs.r, BISECTION, WHY)
    assert _quiet({"body": reply.text})["body"] == reply.text  # Matrix posts it as it is


def test_a_gitlab_note_shows_the_mail_as_it_is_in_one_code_block(tmp_path: Path) -> None:
    r = _result(tmp_path)
    r.subjects[r.new] = "```\n/close @all <img src=x>"  # a repository's words, hostile
    text = mail(r, BISECTION, ["/label ~x", "@all"]).rstrip("\n")
    body = _safe(_markdown_of(Reply(text, verbatim=True)))
    tokens = MarkdownIt("commonmark").parse(body)
    assert [t.type for t in tokens] == ["fence"]
    assert tokens[0].content == text + "\n"  # every line and blank kept, nothing escaped
    assert not any(line.startswith("/") for line in body.splitlines())  # no quick action


@pytest.mark.asyncio
async def test_report_email_yes_in_a_note_answers_with_the_mail(receiver: Receiver) -> None:
    await receiver.post(hook(81, BISECT))
    await receiver.settle()
    await receiver.post(hook(82, f"/kbisect report {JOB} email=yes"))
    await receiver.settle()
    notes: list[Any] = receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")
    body = notes[-1]["body"]
    (block,) = [t for t in MarkdownIt("commonmark").parse(body) if t.type == "fence"]
    bisection = await receiver.jobs.bisection_of(JOB)
    assert block.content == mail(receiver.jobs.result_of[bisection], bisection)
    assert block.content.startswith("Subject: [REGRESSION][BISECTED] avg_read_sectors")
    assert "\n#regzbot introduced: " in block.content
