"""A verified backport, ready to send: `kbisect report BACKPORT_JOB --sru-patch DIR` writes
the series a backport job measured (prerequisites first, then the change) as
`[SRU][Series][PATCH n/N]` files with the cover letter, for `git am` on the target.

Each patch carries the kernel team's message: its subject, `BugLink:`, the original body,
`(cherry picked from commit X)` (the series applies as upstream has it, so each patch-id
is upstream's) and the sender's Signed-off-by last; the original author and date stay.
The cover letter is the SRU justification, with the target's before and after in
[Test Plan]. Written through plumbing on the target: no work tree, no branch touched.
"""

from pathlib import Path

from kbisect.builders.backport_series import commit_series
from kbisect.errors import InfraError, UserError
from kbisect.infra.git import Git
from kbisect.reports.backport_report import before_after
from kbisect.reports.sru_note import buglink, sru_note
from kbisect.reports.sru_patch import SruOptions, SruPatch, checkpatch, patch_series, signoff
from kbisect.workflows.backport_types import BackportResult, BackportWord
from kbisect.workflows.bisect_types import BisectResult


def _message(git: Git, commit: str, sender: str, bug: int | None, revert: bool) -> str:
    subject, _, body = git.run("show", "-s", "--format=%B", commit).strip().partition("\n")
    if revert:
        lines = [f'Revert "{subject}"', "", buglink(bug), "", f"This reverts commit {commit}."]
        return "\n".join([*lines, "", f"Signed-off-by: {sender}"]) + "\n"
    lines = [subject, "", buglink(bug), "", *([body.strip()] if body.strip() else [])]
    lines += [f"(cherry picked from commit {commit})", f"Signed-off-by: {sender}"]
    return "\n".join(lines) + "\n"


def _commits(git: Git, result: BackportResult, committer: dict[str, str], bug: int | None) -> str:
    """The series as SRU commits on the target, by the sender (a pick keeps its author and
    date; a revert is the sender's); the tip."""
    sender = f"{committer['GIT_COMMITTER_NAME']} <{committer['GIT_COMMITTER_EMAIL']}>"
    revert = result.plan.revert

    def written(commit: str) -> tuple[str, dict[str, str]]:
        if revert:
            who = {**committer, "GIT_AUTHOR_NAME": committer["GIT_COMMITTER_NAME"],
                   "GIT_AUTHOR_EMAIL": committer["GIT_COMMITTER_EMAIL"]}  # fmt: skip
        else:
            name, mail, date = git.run(
                "show", "-s", "--format=%an%x00%ae%x00%aI", commit
            ).strip().split("\0")  # fmt: skip
            who = {**committer, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail,
                   "GIT_AUTHOR_DATE": date}  # fmt: skip
        return _message(git, commit, sender, bug, revert), who

    try:
        return commit_series(git, result.target, result.plan.series, written, reverse=revert)
    except InfraError as exc:
        raise UserError(f"{exc}: the target moved since the backport job; run it again") from exc


def write_backport_series(
    result: BackportResult, bisection: BisectResult, out: Path, opts: SruOptions, job_id: str
) -> SruPatch:
    if result.word != BackportWord.VERIFIED:
        raise UserError(
            f"backport job {job_id} is {result.word!r}, not verified: an SRU ships what was "
            f"verified on the target ('kbisect report {job_id}' says why)"
        )
    series = patch_series(opts.series, result.repo, result.target, result.shown_target)
    git = Git(Path(result.repo))
    sender = signoff(git, opts.signoff)
    name, mail = sender.rsplit("<", 1)
    committer = {"GIT_COMMITTER_NAME": name.strip(), "GIT_COMMITTER_EMAIL": mail.rstrip(">")}
    tip = _commits(git, result, committer, opts.bug)
    out = out.resolve()  # git writes the files from inside the repository
    out.mkdir(parents=True, exist_ok=True)
    listing = git.run(
        "format-patch", "--no-thread", "--cover-letter", "--numbered", "--no-signature",
        f"--subject-prefix=SRU][{series.capitalize()}][PATCH", "-o", str(out),
        f"{result.target}..{tip}", env=committer,  # the cover letter is from the sender
    )  # fmt: skip
    files = [Path(line) for line in listing.splitlines() if line.strip()]
    cover, patches = files[0], files[1:]
    justification = sru_note(
        bisection, result.job, bug=opts.bug, patch=patches[-1].read_bytes(),
        series=series, backport=result,
    )  # fmt: skip
    text = cover.read_text().replace("*** SUBJECT HERE ***", bisection.subjects.get(
        result.plan.change, git.commit_info(result.plan.change).subject))  # fmt: skip
    cover.write_text(text.replace("*** BLURB HERE ***", f"{buglink(opts.bug)}\n\n{justification}"))
    name = result.shown_target
    done = SruPatch(files=files, provenance="cherry picked", target=result.target, target_name=name)
    summaries = [checkpatch(git, result.target, p, sender)[0] for p in patches]
    done.checkpatch = "; ".join(
        f"{p.name}: {s}" for p, s in zip(patches, summaries, strict=True) if s
    )
    done.notes += before_after(result)
    if opts.bug is None:
        done.notes.append("no --bug: fill in the BugLink lines before sending")
    return done
