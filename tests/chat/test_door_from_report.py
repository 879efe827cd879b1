"""`bisect from-report` in the doors: the grammar takes it, the report's fields fill what the
command does not give (chosen as `kbisect bisect --from-report` chooses them), the reply
says each field and where it came from, dry-run=yes starts nothing, and a mail that cannot
be read is one line in the door's words. The mail comes pasted below the command's line
or, in Matrix, as the text or the file the command answers (against a real Synapse in
test_matrix_from_report). The job service is a stand-in; the plan is the CLI's own."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kbisect.doors.actions import door_words, execute
from kbisect.doors.gitlab import pasted_mail
from kbisect.doors.grammar import parse
from kbisect.doors.matrix import command_text, pasted_below, without_fallback
from kbisect.errors import UserError
from kbisect.settings import Settings
from tests.chat.test_gitlab_door import PROJECT, Receiver, hook, receiver
from tests.chat.test_matrix_hardening import StubJobs
from tests.conftest import git, tree_lab
from tests.kbisect.test_lkp_report import COMMIT, report

__all__ = ["receiver"]  # the GitLab receiver fixture, used here by name


def lab_mail(upstream: Path, **fields: Any) -> str:
    """An LKP report of the named tree "lab" (tree_lab): its master reported against v1."""
    bad = git(upstream, "rev-parse", "master").strip()
    base = git(upstream, "rev-parse", "v1").strip()
    text = report(commit_line=f'commit: {bad} ("add c")', base=base[:10], header_base=base[:16])
    for n in (40, 27, 10):  # the commit's hash, whole and cut as LKP cuts it
        text = text.replace(COMMIT[:n], bad[:n])
    kernel_org = "https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git"
    return text.replace(f"{kernel_org} master", f"{upstream} master")


def test_the_grammar_takes_from_report_with_keys_that_win() -> None:
    cmd = parse("bisect from-report testcase=nvme-snapshot-read dry-run=yes")
    assert cmd.from_report and cmd.switch("dry-run") and cmd.one("testcase") == "nvme-snapshot-read"
    assert parse("bisect from-report").keys == {}  # every field may come from the mail
    with pytest.raises(UserError, match="drop kernels="):
        parse("bisect from-report kernels=linux-image-a,linux-image-b")
    with pytest.raises(UserError, match="unknown key 'dry-run' for bisect"):
        parse("bisect tree=lab good=v1 bad=master testcase=t dry-run=yes")  # from-report's only
    with pytest.raises(UserError, match="'please' is not key=value"):
        parse("bisect from-report please")
    with pytest.raises(UserError, match="mode=regression or mode=fix"):
        parse("bisect from-report mode=maybe")


def test_the_doors_find_the_pasted_mail() -> None:
    body = "!kbisect bisect from-report\ncommit: abc\ntestcase: hackbench"
    assert command_text(body) == "bisect from-report"
    assert pasted_below(body) == b"commit: abc\ntestcase: hackbench"
    assert pasted_below("!kbisect bisect from-report\n\n  \n") is None
    # an older client's reply quotes what it answers first: not the command, not the mail
    reply = "> <@alice:hs> the robot's mail\n> more of it\n\n!kbisect bisect from-report"
    assert without_fallback(reply) == "!kbisect bisect from-report"
    assert command_text(reply) == "bisect from-report" and pasted_below(reply) is None
    note = "/kbisect bisect from-report\n```\ncommit: abc\n```\n"
    assert pasted_mail(note) == b"commit: abc"
    assert pasted_mail("/kbisect bisect from-report\n") is None


def test_refusals_name_the_doors_keys_not_the_command_line_options() -> None:
    said = door_words(
        "the report has no 'commit: ...' line: it names no commit (give --bad REV); add it "
        "(kbisect tree add NAME URL --branch B), or give --repo DIR"
    )
    assert said == (
        "the report has no 'commit: ...' line: it names no commit (give bad=REV); add it "
        "(kbisect tree add NAME URL --branch B)"
    )
    assert door_words("--from-report the mail: over 1 MiB") == "the mail: over 1 MiB"


def _run(cmd: str, mail: bytes | None, settings: Settings, jobs: Any) -> Any:
    """The command through the doors' execute, as @alice, whose start is claimed."""
    claims: list[int] = []
    owns, claim = (lambda job: True), (lambda: claims.append(1))
    return asyncio.run(execute(parse(cmd), jobs, settings, owns, "@alice (test)", claim, mail))


def test_the_mail_fills_the_job_and_the_command_s_keys_win(tmp_path: Path, cache: Path) -> None:
    upstream, settings = tree_lab(tmp_path, cache)
    jobs = StubJobs()
    mail = lab_mail(upstream).encode()
    reply = _run("bisect from-report testcase=nvme-snapshot-read", mail, settings, jobs)
    assert reply.ok and reply.job_id == "inv-nvme-snapshot-read-00000001", reply.text
    (req,) = jobs.started
    master, v1 = (git(upstream, "rev-parse", r).strip() for r in ("master", "v1"))
    assert (req.bad, req.good, req.tree) == (master, [v1], "lab")
    assert req.testcase == "nvme-snapshot-read"
    lines = reply.text.splitlines()
    assert lines[0].startswith("started inv-nvme-snapshot-read-00000001: ")
    assert "testcase: nvme-snapshot-read (testcase=; the report's: hackbench:pipe)" in lines
    assert any(line.startswith(f"bad: {master} (line 8 ") for line in lines), lines
    assert any(line.startswith("tree: lab (line 9 ") for line in lines), lines
    # dry-run=yes: the same lines, no job
    shown = _run("bisect from-report testcase=nvme-snapshot-read dry-run=yes", mail, settings, jobs)
    assert shown.ok and shown.job_id is None and len(jobs.started) == 1
    assert shown.text.splitlines() == lines[1:]


@pytest.mark.parametrize("hostile", ["none", "no-commit", "unknown-test", "10-mb", "no-tree"])
def test_a_mail_that_cannot_be_read_is_one_line_and_starts_nothing(
    hostile: str, tmp_path: Path, cache: Path
) -> None:
    upstream, settings = tree_lab(tmp_path, cache)
    mail: bytes | None = {
        "none": None,
        "no-commit": lab_mail(upstream).replace("commit: ", "commit ", 1).encode(),
        "unknown-test": report(test="netperf", metric="netperf.Throughput_Mbps").encode(),
        "10-mb": b"\x1b[31m" * ((10 << 20) // 5),
        "no-tree": report().encode(),  # git.kernel.org: no named tree here is it
    }[hostile]
    jobs = StubJobs()
    reply = _run("bisect from-report", mail, settings, jobs)
    assert not reply.ok and reply.job_id is None and jobs.started == []
    assert "\n" not in reply.text and "--" not in reply.text.replace("--branch", ""), reply.text
    assert {
        "none": "send the command as a reply to the mail",
        "no-commit": "it names no commit",
        "unknown-test": "'netperf' has no kbisect testcase",
        "10-mb": "the mail: over 1 MiB",
        "no-tree": "is no named tree",
    }[hostile] in reply.text, reply.text


async def test_a_gitlab_note_with_the_mail_pasted_below_starts_its_job(receiver: Receiver) -> None:
    mail = lab_mail(receiver.upstream)
    note = f"/kbisect bisect from-report testcase=nvme-snapshot-read\n```\n{mail}```\n"
    assert (await receiver.post(hook(31, note)))[0] == 202
    assert (await receiver.post(hook(32, "/kbisect bisect from-report")))[0] == 202
    await receiver.settle()
    (req,) = receiver.jobs.started
    master = git(receiver.upstream, "rev-parse", "master").strip()
    assert (req.bad, req.tree, req.testcase) == (master, "lab", "nvme-snapshot-read")
    bodies = [n["body"] for n in receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")]
    started = next(b for b in bodies if b.startswith("kbisect started `"))
    assert f"bad: {master} (line 8 " in started and "tree: lab (line 9 " in started, started
    (refused,) = [b for b in bodies if "from-report reads an LKP report" in b]
    assert "\n" not in refused
