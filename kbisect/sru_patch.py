"""The SRU backport, ready to send: `kbisect report JOB --sru-patch DIR` writes the cover
letter `[SRU][Series][PATCH 0/1]` (the justification) and the patch from `git
format-patch`, made from the commit the job's verification tested (the fix applied to the
old endpoint, or the culprit reverted on the new one).

Its message follows the kernel team's rules: `BugLink:` first, the original message,
the provenance, `(cherry picked from commit X)` when the change applied as it is upstream
(same patch-id) or `(backported from commit X)` with a `[who: why]` note when it did not,
and the sender's Signed-off-by last. It checks that the patch applies to the tip it
targets, and runs the tree's own scripts/checkpatch.pl on it.
"""

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.contract import BisectResult, Mode
from kbisect.errors import InfraError, UserError
from kbisect.git import Git, git_argv, git_env

SIGNOFF = re.compile(r"[^<>\n]+ <[^<>@\s]+@[^<>\s]+>")
SERIES = re.compile(r"[a-z][a-z0-9-]{1,30}")
BUGLINK = "https://bugs.launchpad.net/bugs/{bug}"


@dataclass(frozen=True)
class SruOptions:
    series: str = "jammy"
    bug: int | None = None
    signoff: str | None = None  # "Name <mail>"; default: git's user.name and user.email
    target: str | None = None  # must apply here; default: where the verification applied it


@dataclass
class SruPatch:
    files: list[Path]
    provenance: str
    target: str
    checkpatch: str = ""  # its summary line, "" where the tree has none
    notes: list[str] = field(default_factory=list)


def buglink(bug: int | None) -> str:
    return "BugLink: " + BUGLINK.format(bug=bug if bug is not None else "<bug number>")


def _signoff(git: Git, given: str | None) -> str:
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


def _patch_id(git: Git, rev: str) -> str:
    diff = git.run("diff-tree", "-p", "--full-index", f"{rev}^1", rev, "--").encode()
    out = subprocess.run(
        git_argv(git.repo, "patch-id", "--stable"), input=diff, env=git_env(), capture_output=True
    )
    return out.stdout.decode().split(" ")[0]


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
        same = _patch_id(git, tested) == _patch_id(git, c)
        provenance = "cherry picked" if same else "backported"
        note = [] if same else [f"[{short}: context adjusted to apply on {result.old[0][:12]}]"]
        # The provenance joins the original's trailers, as `git cherry-pick -x` puts it.
        lines = [subject, "", buglink(bug), "", *([body.strip()] if body.strip() else [])]
        lines += [f"({provenance} from commit {c})", *note]
    return "\n".join([*lines, f"Signed-off-by: {sender}"]) + "\n", provenance


def write_sru_patch(result: BisectResult, job_id: str, out: Path, opts: SruOptions) -> SruPatch:
    from kbisect.sru import sru_note

    v = result.verification
    if not result.culprit:
        raise UserError(f"job {job_id} named no commit ({result.status}): nothing to send")
    if v is None or not v.commit:
        raise UserError(
            f"job {job_id} has no tested backport or revert (its verification: "
            f"{v.status if v else 'skipped'}): run the job without --no-verify"
        )
    if not SERIES.fullmatch(opts.series):
        raise UserError(f"--series {opts.series!r}: give a release's code name, e.g. jammy")
    git = Git(Path(result.repo))
    sender = _signoff(git, opts.signoff)
    target = git.resolve(opts.target or v.onto)
    message, provenance = _message(git, result, v.commit, sender, opts.bug)
    author = git.run("show", "-s", "--format=%an%x00%ae%x00%aI", result.culprit).strip().split("\0")
    name, mail = sender.rsplit("<", 1)
    who = {"GIT_COMMITTER_NAME": name.strip(), "GIT_COMMITTER_EMAIL": mail.rstrip(">")}
    if provenance == "revert":
        who |= {"GIT_AUTHOR_NAME": name.strip(), "GIT_AUTHOR_EMAIL": mail.rstrip(">")}
    else:  # a backport keeps its author
        who |= {
            "GIT_AUTHOR_NAME": author[0],
            "GIT_AUTHOR_EMAIL": author[1],
            "GIT_AUTHOR_DATE": author[2],
        }
    tree = git.tree_of(v.commit)
    commit = git.run("commit-tree", tree, "-p", v.onto, "-F", "-", env=who, input=message.encode())
    commit = commit.strip()
    out.mkdir(parents=True, exist_ok=True)
    series = opts.series.capitalize()
    made = git.run(
        "format-patch",
        "--no-thread",
        "--cover-letter",
        "--numbered",
        "--no-signature",
        f"--subject-prefix=SRU][{series}][PATCH",
        "-o",
        str(out),
        f"{v.onto}..{commit}",
        env=who,  # the cover letter is from the sender
    )
    files = [Path(line) for line in made.splitlines() if line.strip()]
    cover, patch = files[0], files[1]
    justification = sru_note(
        result, job_id, bug=opts.bug, patch=patch.read_bytes(), provenance=provenance
    )
    text = cover.read_text()
    text = text.replace("*** SUBJECT HERE ***", message.split("\n", 1)[0])
    text = text.replace("*** BLURB HERE ***", f"{buglink(opts.bug)}\n\n{justification}")
    cover.write_text(text)
    done = SruPatch(files=files, provenance=provenance, target=target)
    _check_applies(git, patch, target)
    done.checkpatch = _checkpatch(git, target, patch)
    if opts.bug is None:
        done.notes.append("no --bug: fill in the BugLink lines before sending")
    return done


def _check_applies(git: Git, patch: Path, target: str) -> None:
    with tempfile.TemporaryDirectory(prefix="kbisect-sru-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git.run("read-tree", target, env=env)
        try:
            git.run("apply", "--cached", "--check", str(patch), env=env)
        except InfraError as exc:
            raise UserError(
                f"the patch does not apply to {target[:12]}: {exc}; pass --target the "
                "branch it is for"
            ) from exc


def _checkpatch(git: Git, rev: str, patch: Path) -> str:
    """The tree's checkpatch.pl on the patch: its summary line ("total: 0 errors, ...")."""
    files = ("scripts/checkpatch.pl", "scripts/spelling.txt", "scripts/const_structs.checkpatch")
    with tempfile.TemporaryDirectory(prefix="kbisect-checkpatch-") as tmp:
        archive = subprocess.run(
            git_argv(git.repo, "archive", rev, "--", *files),
            env=git_env(),
            capture_output=True,
        )
        if archive.returncode != 0:
            return ""  # not a kernel tree
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        git_dir = git.run("rev-parse", "--absolute-git-dir").strip()
        run = subprocess.run(
            ["perl", "scripts/checkpatch.pl", "--no-tree", "--no-color", str(patch.resolve())],
            cwd=tmp,
            env={**git_env(), "GIT_DIR": git_dir},  # so it can look the commit ids up
            capture_output=True,
            text=True,
            timeout=300,
        )
    totals = [line for line in run.stdout.splitlines() if line.startswith("total:")]
    return totals[-1] if totals else run.stdout.strip().splitlines()[-1:][0] if run.stdout else ""
