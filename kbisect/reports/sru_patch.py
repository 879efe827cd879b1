"""The SRU backport, ready to send: `kbisect report JOB --sru-patch DIR` writes the cover
letter `[SRU][Series][PATCH 0/1]` (the justification) and the patch from `git
format-patch`, made from the commit the job's verification tested (the fix applied to the
old endpoint, or the culprit reverted on the new one).

Its message follows the kernel team's rules: `BugLink:` first, the original message,
the provenance, `(cherry picked from commit X)` when the change applied as it is upstream
(same patch-id) or `(backported from commit X)` with a `[who: why]` note when it did not,
and the sender's Signed-off-by last. It checks that the patch applies to the tip of the
branch it targets (--target, else the branch the job's tested endpoint is on: see
default_target), and runs the tree's own scripts/checkpatch.pl on it (GIT_COMMIT_ID
ignored for the provenance line: see checkpatch).
"""

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.builders.backport_found import patch_ids
from kbisect.builders.distro_series import checked, sru_series
from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git, git_argv, git_env
from kbisect.reports.sru_note import buglink, sru_note
from kbisect.workflows.bisect_types import BisectResult

SIGNOFF = re.compile(r"[^<>\n]+ <[^<>@\s]+@[^<>\s]+>")


@dataclass(frozen=True)
class SruOptions:
    series: str | None = None  # None: the target tree's own (distro_series)
    bug: int | None = None
    signoff: str | None = None  # "Name <mail>"; default: git's user.name and user.email
    target: str | None = None  # must apply here; default: default_target()


@dataclass
class SruPatch:
    files: list[Path]
    provenance: str
    target: str  # the commit it was checked against
    target_name: str = ""  # the branch (or revision) that commit is the tip of
    checkpatch: str = ""  # its summary line, "" where the tree has none
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SruCommit:
    """The patch as a commit on the endpoint the job tested it on: the tested tree, with the
    SRU message, the original author (a backport) or the sender (a revert)."""

    commit: str
    onto: str
    message: str
    provenance: str
    author: tuple[str, str]  # name, mail
    who: dict[str, str]  # the GIT_AUTHOR_* and GIT_COMMITTER_* it was written with


def signoff(git: Git, given: str | None) -> str:
    if given is None:
        name = git.run("config", "user.name", check=False).strip()
        mail = git.run("config", "user.email", check=False).strip()
        given = f"{name} <{mail}>" if name and mail else ""
    if not SIGNOFF.fullmatch(given or ""):
        raise UserError(
            f"a Signed-off-by needs 'Name <mail>', not {given!r}: pass --signoff 'Your Name "
            "<you@example.com>'"
        )
    return given


def _message(
    git: Git, result: BisectResult, tested: str, sender: str, bug: int | None
) -> tuple[str, str]:
    """The commit message, and the provenance it carries."""
    c = result.culprit or ""
    original = git.run("show", "-s", "--format=%B", c).strip()
    subject, _, body = original.partition("\n")
    short = sender.split("<")[0].strip().split()[0].lower()
    if result.mode == Mode.REGRESSION:
        provenance = "revert"
        lines = [
            f'Revert "{subject}"',
            "",
            buglink(bug),
            "",
            f"This reverts commit {c}.",
            "",
            f"It made {result.testcase} worse ({result.metric}: {result.effect or 'see the bug'}).",
            "",
        ]
    else:
        ids = patch_ids(git, [tested, c])
        same = ids.get(tested) == ids.get(c)
        provenance = "cherry picked" if same else "backported"
        note = [] if same else [f"[{short}: context adjusted to apply on {result.old[0][:12]}]"]
        # The provenance joins the original's trailers, as `git cherry-pick -x` puts it.
        lines = [subject, "", buglink(bug), "", *([body.strip()] if body.strip() else [])]
        lines += [f"({provenance} from commit {c})", *note]
    return "\n".join([*lines, f"Signed-off-by: {sender}"]) + "\n", provenance


def _tested(result: BisectResult, job_id: str) -> tuple[str, str]:
    """The verification commit and the endpoint it was made on."""
    v = result.verification
    if not result.culprit:
        raise UserError(f"job {job_id} named no commit ({result.status}): nothing to send")
    if v is None or not v.commit:
        raise UserError(
            f"job {job_id} has no tested backport or revert (its verification: "
            f"{v.status if v else 'skipped'}): run the job without --no-verify"
        )
    return v.commit, v.onto


def sru_commit(result: BisectResult, job_id: str, opts: SruOptions) -> SruCommit:
    """The tested commit again, with the kernel team's message (no patch files yet)."""
    tested, onto = _tested(result, job_id)
    if opts.series:
        checked(opts.series)
    git = Git(Path(result.repo))
    sender = signoff(git, opts.signoff)
    message, provenance = _message(git, result, tested, sender, opts.bug)
    culprit = result.culprit or ""
    original = git.run("show", "-s", "--format=%an%x00%ae%x00%aI", culprit).strip().split("\0")
    name, mail = sender.rsplit("<", 1)
    sender_id = (name.strip(), mail.rstrip(">"))
    who = {"GIT_COMMITTER_NAME": sender_id[0], "GIT_COMMITTER_EMAIL": sender_id[1]}
    if provenance == "revert":
        author = sender_id
        who |= {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1]}
    else:  # a backport keeps its author
        author = (original[0], original[1])
        who |= {
            "GIT_AUTHOR_NAME": author[0],
            "GIT_AUTHOR_EMAIL": author[1],
            "GIT_AUTHOR_DATE": original[2],
        }
    tree = git.tree_of(tested)
    commit = git.run("commit-tree", tree, "-p", onto, "-F", "-", env=who, input=message.encode())
    return SruCommit(commit.strip(), onto, message, provenance, author, who)


def default_target(result: BisectResult, onto: str) -> tuple[str, str, list[str]]:
    """The tip of the branch the patch is for, its name, and notes.

    That is a branch (local or remote-tracking) holding the endpoint the job tested the
    patch on and, for a backport, not the fix itself (a branch that has it needs no
    backport). Of several, the one fewest commits past the endpoint; with none, the
    endpoint itself, and a note to pass --target.
    """
    git = Git(Path(result.repo))
    args = ["for-each-ref", "--format=%(refname)", "--contains", onto]
    if result.mode == Mode.FIX and result.culprit:
        args += ["--no-contains", result.culprit]
    out = git.run(*args, "refs/heads", "refs/remotes")
    refs = [r for r in out.splitlines() if r and not r.endswith("/HEAD")]
    if not refs:
        what = "without the fix" if result.mode == Mode.FIX else ""
        note = (
            f"no branch here holds {onto[:12]} {what}".rstrip()
            + ": checked against that endpoint; pass --target the branch the patch is for"
        )
        return onto, onto[:12], [note]
    ahead = {r: int(git.run("rev-list", "--count", f"{onto}..{r}").strip()) for r in refs}
    best = min(refs, key=lambda r: (ahead[r], r))
    name = best.removeprefix("refs/heads/").removeprefix("refs/remotes/")
    notes = []
    if len(refs) > 1:
        others = ", ".join(
            r.removeprefix("refs/heads/").removeprefix("refs/remotes/") for r in refs if r != best
        )
        notes.append(f"checked against {name}; also on {others}: pass --target to check one")
    return git.resolve(best), name, notes


def patch_series(given: str | None, repo: str, target: str, target_name: str) -> str:
    """The series a patch's subject names: given, or the target tree's; else refused."""
    series = sru_series(given, repo, target)
    if series is None:
        raise UserError(
            f"give --series NAME: {target_name} has no debian/changelog naming its release"
        )
    return series


def write_sru_patch(result: BisectResult, job_id: str, out: Path, opts: SruOptions) -> SruPatch:
    made = sru_commit(result, job_id, opts)
    out = out.resolve()  # git writes the files from inside the repository
    git = Git(Path(result.repo))
    notes: list[str] = []
    if opts.target:
        target, target_name = git.resolve(opts.target), opts.target
    else:
        target, target_name, notes = default_target(result, made.onto)
    series = patch_series(opts.series, result.repo, target, target_name)
    out.mkdir(parents=True, exist_ok=True)
    listing = git.run(
        "format-patch",
        "--no-thread",
        "--cover-letter",
        "--numbered",
        "--no-signature",
        f"--subject-prefix=SRU][{series.capitalize()}][PATCH",
        "-o",
        str(out),
        f"{made.onto}..{made.commit}",
        env=made.who,  # the cover letter is from the sender (the committer)
    )
    files = [Path(line) for line in listing.splitlines() if line.strip()]
    cover, patch = files[0], files[1]
    justification = sru_note(
        result,
        job_id,
        bug=opts.bug,
        patch=patch.read_bytes(),
        provenance=made.provenance,
        series=series,
    )
    text = cover.read_text()
    text = text.replace("*** SUBJECT HERE ***", made.message.split("\n", 1)[0])
    text = text.replace("*** BLURB HERE ***", f"{buglink(opts.bug)}\n\n{justification}")
    cover.write_text(text)
    done = SruPatch(
        files=files,
        provenance=made.provenance,
        target=target,
        target_name=target_name,
        notes=notes,
    )
    _check_applies(git, patch, target, target_name)
    done.checkpatch, explained = checkpatch(git, target, patch, "{} <{}>".format(*made.author))
    done.notes += explained
    if opts.bug is None:
        done.notes.append("no --bug: fill in the BugLink lines before sending")
    return done


def _check_applies(git: Git, patch: Path, target: str, name: str) -> None:
    """One line that says where and why when the patch does not apply to the target."""
    with tempfile.TemporaryDirectory(prefix="kbisect-sru-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git.run("read-tree", target, env=env)
        proc = subprocess.run(
            git_argv(git.repo, "apply", "--cached", "--check", str(patch.resolve())),
            env=git_env(env),
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        errors = [line.removeprefix("error: ") for line in proc.stderr.splitlines()]
        why = "; ".join(e for e in errors if e.strip()) or f"git apply exited {proc.returncode}"
        where = name if name.startswith(target[:12]) else f"{name} ({target[:12]})"
        raise UserError(
            f"the patch does not apply to {where}: {why}; backport it by hand there, or pass "
            "--target the branch it is for"
        )


PROVENANCE_LINE = re.compile(r"^\((cherry picked|backported) from commit [0-9a-f]{40}\)$")


def _provenance_line(patch: Path) -> str | None:
    """kbisect's '(cherry picked|backported from commit X)' line in the patch's message."""
    message = patch.read_text(errors="replace").split("\n---\n", 1)[0]
    lines = [line for line in message.splitlines() if PROVENANCE_LINE.match(line)]
    return lines[-1] if lines else None


def checkpatch(git: Git, rev: str, patch: Path, author: str) -> tuple[str, list[str]]:
    """The tree's checkpatch.pl on the patch: its summary line ("total: 0 errors, ...", and
    why GIT_COMMIT_ID was ignored), "" where the tree has none, and notes on its errors.

    checkpatch (6.1) flags any "commit <sha>" not written `commit <12> ("subject")`, the
    "This reverts commit" line alone exempt, in the message up to its first Signed-off-by:
    the provenance line the Ubuntu SRU format requires, as `git cherry-pick -x` writes it,
    is an error when the original has no Signed-off-by before it. So GIT_COMMIT_ID is
    ignored when, and only when, the patch carries that line.

    The script is the tree's code: it runs in a copy of its files with _script_env only,
    and looks commit ids up in a repository of its own that reads the user's objects."""
    files = ("scripts/checkpatch.pl", "scripts/spelling.txt", "scripts/const_structs.checkpatch")
    provenance = _provenance_line(patch)
    ignore = ["--ignore", "GIT_COMMIT_ID"] if provenance else []
    with tempfile.TemporaryDirectory(prefix="kbisect-checkpatch-") as tmp:
        archive = subprocess.run(
            git_argv(git.repo, "archive", rev, "--", *files),
            env=git_env(),
            capture_output=True,
        )
        if archive.returncode != 0:
            return "", []  # not a kernel tree
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        _lookup_repository(git, Path(tmp))
        run = subprocess.run(
            [
                "perl",
                "scripts/checkpatch.pl",
                "--no-tree",
                "--no-color",
                "--show-types",
                *ignore,
                str(patch.resolve()),
            ],
            cwd=tmp,
            env=_script_env(Path(tmp)),
            capture_output=True,
            text=True,
            timeout=300,
        )
    lines = run.stdout.splitlines()
    totals = [line for line in lines if line.startswith("total:")]
    summary = totals[-1] if totals else lines[-1] if lines else ""
    if summary and provenance:
        kind = provenance.split(" from ", 1)[0].lstrip("(")
        summary += (
            f" (GIT_COMMIT_ID ignored: the SRU provenance line '({kind} from commit X)' is "
            "Ubuntu's required form)"
        )
    return summary, _explained(lines, author)


def _lookup_repository(git: Git, tree: Path) -> None:
    """A repository at tree/.git, where checkpatch looks the commit ids it checks up, that
    reads the user's objects (alternates) and writes none of the user's files."""
    objects = git.run("rev-parse", "--path-format=absolute", "--git-path", "objects").strip()
    subprocess.run(git_argv(tree, "init", "-q"), env=git_env(), check=True, capture_output=True)
    (tree / ".git/objects/info/alternates").write_text(objects + "\n")


def _script_env(home: Path) -> dict[str, str]:
    """The environment of the tree's own script: a kernel tree's file, run as it is, so it
    gets no variable it does not need (no key or token of the user's, no GIT_*), and a
    HOME of its own (no ~/.checkpatch.conf or ~/.gitconfig of the user's)."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C", "HOME": str(home)}


def _explained(lines: list[str], author: str) -> list[str]:
    """Notes on checkpatch errors that come from the original commit, not the backport."""
    notes = []
    for line in lines:
        kind = line.split(":", 2)[1] if line.startswith("ERROR:") and line.count(":") >= 2 else ""
        if kind == "NO_AUTHOR_SIGN_OFF":
            notes.append(
                f"checkpatch's NO_AUTHOR_SIGN_OFF error: the original commit has no "
                f"Signed-off-by from its author ({author}); an upstream commit has one, so "
                "check that the named commit is the upstream one before sending"
            )
    return notes
