"""`kbisect report ID --email`: a finished bisection as a mail in the kernel lists' form
(a regression report with regzbot's line, or in fix mode a stable backport request), and
others' words in it (a guest's, a repository's) never a header nor a line that reads as
one."""

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from temporalio.client import WorkflowExecutionStatus

from kbisect.cli import jobs as cli_jobs
from kbisect.contract import INVESTIGATION_WORKFLOW, WORKFLOW
from kbisect.errors import UserError
from kbisect.main import main
from kbisect.reports.email_report import (
    CLOSES,
    LINE_CAP,
    REPORTED_BY,
    WHY_LINES,
    change,
    mail,
    subject_line,
    subsystem,
)
from kbisect.workflows.bisect_types import BadBoot, BisectResult, Step, Verification
from kbisect.workflows.explain_types import ExplainResult

GOOD, BAD = "a" * 40, "b" * 40
CULPRIT = "1966bd061a65e2c8a9e7f5b3c0d1e2f3a4b5c6d7"
EFFECT = "-98.4% (95% CI -98.6% to -98.2%; 5+5 boots)"
WHY = ["queue: requests merged 0 (63 a request before)", "block: request size 8 sectors (512)"]
# A field name, then a colon: what a mail reader or git send-email takes for a header.
HEADERISH = re.compile(r"[\x21-\x39\x3b-\x7e]+:")


def _result(tmp_path: Path, mode: str = "regression") -> BisectResult:
    """A finished bisection as the workflow returns it (its repository is not readable
    here: the culprit's author is left out, as on another host)."""
    old, new = ([GOOD], BAD) if mode == "regression" else ([BAD], GOOD)
    old_value, new_value = (512.0, 8.0) if mode == "regression" else (8.0, 512.0)
    return BisectResult(
        status="found",
        mode=mode,
        testcase="nvme-snapshot-read",
        repo=str(tmp_path / "no-repo"),
        old=old,
        new=new,
        culprit=CULPRIT,
        candidates=[CULPRIT],
        steps=[
            Step(old[0], "Linux 6.1", "good", "endpoint", value=old_value, boots=5),
            Step(new, "Linux 6.2", "bad", "endpoint", value=new_value, boots=5),
            Step(CULPRIT, "nvme: set QUEUE_FLAG_NOMERGES", "bad", "test", value=new_value),
        ],
        message="first bad commit",
        subjects={CULPRIT: "nvme: set QUEUE_FLAG_NOMERGES", GOOD: "Linux 6.1", BAD: "Linux 6.2"},
        metric="avg_read_sectors",
        unit="sectors",
        verification=Verification(
            kind="revert" if mode == "regression" else "backport",
            change=CULPRIT,
            onto=new,
            status="confirmed",
            message="reverted on the new endpoint, it behaves like the old endpoint",
            boots=3,
        ),
        profile="fast",
        repetitions=3,
        confidence=0.999,
        effect=EFFECT if mode == "regression" else "+6300.0% (95% CI +6200.0% to +6400.0%)",
        boots=14,
    )


def _split(text: str) -> tuple[list[str], list[str]]:
    """A mail's header lines and body lines (the first blank line parts them)."""
    head, _, body = text.partition("\n\n")
    return head.split("\n"), body.split("\n")


def _paragraph_of(lines: list[str], start: str) -> list[str]:
    i = next(n for n, line in enumerate(lines) if line.startswith(start))
    j = next((n for n in range(i, len(lines)) if not lines[n]), len(lines))
    return lines[i:j] if lines[i - 1] == "" else []


def test_a_regression_is_a_report_with_regzbots_line_the_effect_and_placeholders(
    tmp_path: Path,
) -> None:
    head, body = _split(mail(_result(tmp_path), "inv-nvme-snapshot-read-0000000a-bisect", WHY))
    assert head == [
        "Subject: [REGRESSION][BISECTED] nvme: avg_read_sectors -98.4% (nvme-snapshot-read)",
        "To: <the culprit's author and maintainers: scripts/get_maintainer.pl on its files>",
        "Cc: regressions@lists.linux.dev",
    ]
    text = "\n".join(body)
    assert f'  commit {CULPRIT} ("nvme: set QUEUE_FLAG_NOMERGES")' in body
    assert (
        '  good aaaaaaaaaaaa ("Linux 6.1")' in body and '  bad  bbbbbbbbbbbb ("Linux 6.2")' in body
    )
    # regzbot's command: its first character a line's, in a paragraph of its own, 12 hex
    assert _paragraph_of(body, "#regzbot") == ["#regzbot introduced: 1966bd061a65"]
    assert "#regzbot title" not in text  # regzbot takes the title from the subject
    # the measured effect with its interval and boots, each side's median and boots
    flat = " ".join(text.split())  # prose wrapped at 72 columns, as one line
    assert f"The effect, the bad kernel against the good one: {EFFECT}" in flat
    assert "  avg_read_sectors on the good kernel: 512 sectors (median of 5 boots)" in body
    assert "  avg_read_sectors on the bad kernel: 8 sectors (median of 5 boots)" in body
    assert "  14 boots to bisect it; 99.9% sure of each verdict that named the commit" in body
    assert [f"  - {w}" for w in WHY] == [line for line in body if line.startswith("  - ")]
    assert "(revert, 3 boots): confirmed, reverted on the new endpoint" in flat
    assert (
        f"  kbisect bisect --repo LINUX --good {GOOD} --bad {BAD} --testcase "
        "nvme-snapshot-read --metric avg_read_sectors --profile fast --repetitions 3"
    ) in body
    assert f"  kbisect try --repo LINUX '{CULPRIT}^' --testcase nvme-snapshot-read" in text
    assert body[body.index(REPORTED_BY) + 1] == CLOSES  # left for the sender to fill
    assert all(len(line) <= 72 for line in body if not line.startswith(("  ", "| ", "(")))


def test_fix_mode_asks_stable_for_the_backport_with_no_regzbot_line(tmp_path: Path) -> None:
    head, body = _split(mail(_result(tmp_path, "fix"), "bisect-nvme-snapshot-read-0000000b"))
    assert head == [
        'Subject: Please backport 1966bd061a65 ("nvme: set QUEUE_FLAG_NOMERGES") to <X.Y>.y',
        "To: stable@vger.kernel.org",
        "Cc: <the fix's author and maintainers: scripts/get_maintainer.pl on its files>",
    ]
    text = "\n".join(body)
    assert "please backport commit 1966bd061a65e2c8a9e7f5b3c0d1e2f3a4b5c6d7" in text
    assert "#regzbot" not in text and "Reported-by" not in text and "Closes" not in text
    assert '  broken bbbbbbbbbbbb ("Linux 6.2")' in body and "  fixed  aaaaaaaaaaaa" in text
    assert "The effect, the fixed kernel against the broken one: +6300.0%" in " ".join(body)
    assert "  avg_read_sectors on the broken kernel: 8 sectors (median of 5 boots)" in body
    assert "(backport, 3 boots): confirmed" in text
    assert f"--mode fix --good {GOOD} --bad {BAD} --testcase nvme-snapshot-read" in text


HOSTILE = "m\nBcc: evil@example.com\r\nSubject: pwned\u2028To: all@example.com"


def _hostile(tmp_path: Path) -> BisectResult:
    r = _result(tmp_path)
    r.metric = HOSTILE
    r.unit = "u\nCc: evil@example.com"
    r.subjects[CULPRIT] = "nvme: x\nBcc: evil@example.com"
    r.subjects[GOOD] = "\nFrom evil@example.com Mon Jan  1 00:00:00 2024"
    r.steps[0].value = float("nan")
    r.steps[1].value = float("inf")
    r.effect = "nan% (95% CI\nBcc: evil@example.com)"
    r.confidence = float("nan")
    assert r.verification is not None
    r.verification.message = "ok\nSubject: pwned"
    return r


HOSTILE_WHY = [
    "fine\nBcc: evil@example.com",
    "Cc: evil@example.com",
    "From evil@example.com",
    "\u2028Subject: pwned",
    "x" * 10_000,
    *(f"line {n}" for n in range(100)),
]


def test_guest_words_never_make_a_header_or_a_line_that_reads_as_one(tmp_path: Path) -> None:
    text = mail(_hostile(tmp_path), "bisect-x-1", HOSTILE_WHY)
    head, body = _split(text)
    assert [h.split(":", 1)[0] for h in head] == ["Subject", "To", "Cc"]
    assert head[0].startswith("Subject: [REGRESSION][BISECTED] nvme: m Bcc: evil@example.com")
    assert "\r" not in text and "\u2028" not in text  # only \n breaks a line
    for line in body:
        assert not HEADERISH.match(line), line
        assert not line.startswith("From "), line
        assert len(line) <= LINE_CAP + 80, line[:80]
    assert "nan" not in text.lower().replace("nanos", "") and "inf " not in text
    assert (
        "  m Bcc: evil@example.com Subject: pwned To: all@example.com on the good kernel: ?" in text
    )
    why = [line for line in body if line.startswith("  - ")]
    assert len(why) == WHY_LINES and why[0] == "  - fine Bcc: evil@example.com"
    assert why[4].endswith("\u2026") and f"(and {len(HOSTILE_WHY) - WHY_LINES} more lines" in text
    assert len(text) < 12_000


def test_a_header_that_wrapping_would_start_a_line_with_is_indented(tmp_path: Path) -> None:
    """Prose is wrapped at 72 columns: a guest's "Bcc:" that falls at a line's start is
    indented a space, so that it reads as no header field."""
    r = _result(tmp_path)
    r.metric = "y" * 40 + " Bcc: evil@example.com"  # "kbisect found a regression of " + 40
    _, body = _split(mail(r, "bisect-x-1"))
    assert body[2].endswith("y" * 40) and body[3].startswith(" Bcc: evil@example.")
    assert not any(line.startswith("Bcc:") for line in body)


def test_a_pass_fail_mail_names_the_panic_and_quotes_its_console(tmp_path: Path) -> None:
    r = dataclasses.replace(
        _result(tmp_path),
        testcase="boots",
        metric="passed",
        unit="",
        pass_fail=True,
        effect="good boots pass, bad ones panic",
        bad_boot=BadBoot(CULPRIT, "panic", "Kernel panic\nSubject: pwned\n" + "x\n" * 30),
    )
    head, body = _split(mail(r, "bisect-boots-1"))
    assert head[0] == "Subject: [REGRESSION][BISECTED] nvme: kernel panic (boots)"
    assert "    Subject: pwned" in body and "    (and 12 more lines)" in body
    assert not any(HEADERISH.match(line) for line in body)


@pytest.mark.parametrize(
    ("subject", "prefix"),
    [
        ("nvme: set QUEUE_FLAG_NOMERGES", "nvme"),
        ("net: ipv4: fix broadcast routes", "net: ipv4"),
        ('Revert "x86/fpu: Move FPU initialization"', "x86/fpu"),
        ("Merge tag 'block-6.2' of git://git.kernel.dk/linux", ""),
        ("add c", ""),
    ],
)
def test_the_subsystem_is_the_subjects_prefix(subject: str, prefix: str) -> None:
    assert subsystem(subject) == prefix


def test_the_change_is_the_effects_else_the_medians_and_finite_only(tmp_path: Path) -> None:
    r = _result(tmp_path)
    assert change(r) == -98.4
    r.effect = ""
    assert change(r) == pytest.approx(-98.4375)
    r.steps[0].value = float("nan")
    assert change(r) is None
    assert subject_line(r, "j") == (
        "[REGRESSION][BISECTED] nvme: avg_read_sectors (nvme-snapshot-read)"
    )


def test_a_job_that_named_no_commit_is_one_line(tmp_path: Path) -> None:
    r = dataclasses.replace(_result(tmp_path), status="ambiguous", culprit=None)
    with pytest.raises(UserError, match="did not name one commit"):
        mail(r, "bisect-x-1")


# --- the command line ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "other", [["--json"], ["--sru"], ["--plot", "x.png"], ["--bisect-log", "-"], ["--bug", "3"]]
)
def test_email_with_another_output_is_one_line_before_a_service(
    other: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object) -> int:
        raise AssertionError("a service was asked before the options were checked")

    monkeypatch.setattr(cli_jobs, "with_client", boom)
    assert main(["report", "bisect-x-12345678", "--email", *other]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"kbisect: error: --email writes the mail alone on stdout: drop {other[0]}"


class _Jobs:
    """The calls `report --email` makes, for an investigation whose bisection ended with an
    explain job."""

    def __init__(self, result: BisectResult) -> None:
        self.bisection, self.r = "inv-nvme-snapshot-read-0000000c-bisect", result

    async def describe(self, job_id: str) -> SimpleNamespace:
        kind = WORKFLOW if job_id == self.bisection else INVESTIGATION_WORKFLOW
        return SimpleNamespace(workflow_type=kind)

    async def bisection_of(self, job_id: str) -> str:
        return self.bisection

    async def result(self, job_id: str) -> BisectResult:
        assert job_id == self.bisection
        return self.r

    async def status_of(self, job_id: str) -> WorkflowExecutionStatus:
        assert job_id == f"{self.bisection}-explain"
        return WorkflowExecutionStatus.COMPLETED

    async def explain_result(self, job_id: str) -> ExplainResult:
        return ExplainResult("explained", "", "t", "m", "", "higher", "p", CULPRIT, [], why=WHY)


def test_an_investigations_mail_is_its_bisections_with_explains_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = _Jobs(_result(tmp_path))

    def with_client(
        settings: object, args: object, go: Callable[[object, object], Awaitable[int]]
    ) -> int:
        return asyncio.run(go(jobs, args))

    monkeypatch.setattr(cli_jobs, "with_client", with_client)
    assert main(["report", "inv-nvme-snapshot-read-0000000c", "--email"]) == 0
    printed = capsys.readouterr().out
    assert printed == mail(jobs.r, jobs.bisection, WHY)
    assert f"  - {WHY[0]}" in printed and "#regzbot introduced: 1966bd061a65" in printed
