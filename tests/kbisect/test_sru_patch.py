"""The SRU patch series from a job's tested verification commit: what `git am` applies in a
clean clone, with the kernel team's trailers in their order, and its risk section."""

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbisect.builders.verify_commit import make_verify_commit
from kbisect.contract import WORKFLOW, Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.reports.sru_note import sru_note
from kbisect.reports.sru_patch import SruOptions, write_sru_patch
from kbisect.workflows.bisect_types import BisectResult, Step, Verification
from tests.conftest import git

SENDER = "Sam Sender <sam@example.com>"
ID = ["-c", "user.name=Ada Author", "-c", "user.email=ada@example.com"]


def _commit(repo: Path, text: str, message: str) -> str:
    (repo / "drivers").mkdir(exist_ok=True)
    (repo / "drivers" / "f.c").write_text(text)
    git(repo, "add", ".")
    git(repo, *ID, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


CHANGELOG = (
    "linux (5.15.0-92.102) UNRELEASED; urgency=medium\n\n  * next\n\n"
    " -- Ada Author <ada@example.com>  Mon, 01 Jan 2024 00:00:00 +0000\n\n"
    "linux (5.15.0-91.101) jammy; urgency=medium\n\n  * this\n"
)
SOURCE = "int a;\n\nstatic int setup(void)\n{\n\treturn {v};\n}\n\nint z;\n"


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "tree"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    (repo / "debian").mkdir()
    (repo / "debian" / "changelog").write_text(CHANGELOG)  # an Ubuntu kernel tree's
    broken = _commit(repo, SOURCE.replace("{v}", "1"), "drivers: add setup")
    other = _commit(repo, SOURCE.replace("{v}", "1").replace(";\n\n", ";\n/* x */\n", 1), "note")
    fix = _commit(
        repo,
        SOURCE.replace("{v}", "0").replace(";\n\n", ";\n/* x */\n", 1),
        "drivers: make setup succeed\n\nsetup() returned 1, which callers read as a failure.\n\n"
        "Signed-off-by: Ada Author <ada@example.com>",
    )
    return repo, [broken, other, fix]


def _fix_job(repo: Path, old: str, fix: str) -> BisectResult:
    v = make_verify_commit(Git(repo), fix, onto=old, revert=False)
    assert v.commit
    steps = [
        Step(old, "drivers: add setup", "bad", "endpoint", value=8.0),
        Step(fix, "drivers: make setup succeed", "good", "test", value=512.0),
    ]
    return BisectResult(
        status="found",
        mode="fix",
        testcase="nvme-snapshot-read",
        repo=str(repo),
        old=[old],
        new=fix,
        culprit=fix,
        candidates=[fix],
        steps=steps,
        message="fixed by",
        subjects={fix: "drivers: make setup succeed"},
        metric="avg_read_sectors",
        unit="sectors",
        profile="fast",
        verification=Verification(
            kind="backport", change=fix, onto=old, status="confirmed", message="ok", commit=v.commit
        ),
    )


def test_fix_mode_series_applies_with_git_am_in_a_clean_clone(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, (broken, _, fix) = history
    result = _fix_job(repo, broken, fix)
    opts = SruOptions(series="jammy", bug=2012345, signoff=SENDER)
    done = write_sru_patch(result, "bisect-x-1", tmp_path / "out", opts)
    cover, patch = done.files
    assert cover.name == "0000-cover-letter.patch" and patch.name.startswith("0001-")
    assert "Subject: [SRU][Jammy][PATCH 0/1] drivers: make setup succeed" in cover.read_text()
    text = patch.read_text()
    assert "Subject: [SRU][Jammy][PATCH 1/1] drivers: make setup succeed" in text
    assert "From: Ada Author <ada@example.com>" in text  # a backport keeps its author
    message = text.split("\n\n", 1)[1].split("\n---\n", 1)[0].strip().splitlines()
    assert message[0] == "BugLink: https://bugs.launchpad.net/bugs/2012345"
    assert message[-1] == f"Signed-off-by: {SENDER}"
    # The context differs from upstream's (no comment in the broken tree): a backport.
    assert done.provenance == "backported"
    assert f"(backported from commit {fix})" in message
    assert message[message.index(f"(backported from commit {fix})") + 1].startswith("[sam: ")
    assert "Signed-off-by: Ada Author <ada@example.com>" in message  # the original's kept

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "checkout", "-q", broken)
    git(clone, *ID, "am", "-q", "--empty=drop", str(cover), str(patch))
    assert "return 0;" in (clone / "drivers" / "f.c").read_text()
    assert git(clone, "log", "-1", "--format=%an").strip() == "Ada Author"


def test_a_clean_pick_says_cherry_picked(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, (_, other, fix) = history
    result = _fix_job(repo, other, fix)  # the fix's own parent: applies as it is
    done = write_sru_patch(result, "bisect-x-1", tmp_path / "out", SruOptions(signoff=SENDER))
    assert done.provenance == "cherry picked"
    text = done.files[1].read_text()
    assert f"(cherry picked from commit {fix})\nSigned-off-by: {SENDER}\n" in text
    assert "BugLink: https://bugs.launchpad.net/bugs/<bug number>" in text
    assert "no --bug: fill in the BugLink lines before sending" in done.notes


def test_patch_that_does_not_apply_to_the_target_is_refused(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, (broken, _, fix) = history
    result = _fix_job(repo, broken, fix)
    git(repo, "checkout", "-q", "-b", "elsewhere", broken)
    gone = _commit(repo, "nothing alike\n", "rewrite f")
    opts = SruOptions(signoff=SENDER, target=gone)
    with pytest.raises(UserError, match=r"does not apply to .*pass --target"):
        write_sru_patch(result, "bisect-x-1", tmp_path / "out", opts)


@pytest.mark.parametrize("signoff", ["Sam", "<sam@example.com>", "Sam <sam>", "S\n <a@b.c>"])
def test_signoff_must_be_name_and_mail(
    history: tuple[Path, list[str]], tmp_path: Path, signoff: str
) -> None:
    repo, (broken, _, fix) = history
    with pytest.raises(UserError, match="Name <mail>"):
        write_sru_patch(
            _fix_job(repo, broken, fix), "j", tmp_path / "o", SruOptions(signoff=signoff)
        )


def test_no_tested_commit_no_patch(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, (broken, _, fix) = history
    result = _fix_job(repo, broken, fix)
    result.verification = None
    with pytest.raises(UserError, match="without --no-verify"):
        write_sru_patch(result, "j", tmp_path / "o", SruOptions(signoff=SENDER))


def test_risk_names_the_functions_and_never_says_none_or_low(
    history: tuple[Path, list[str]],
) -> None:
    repo, (broken, _, fix) = history
    text = sru_note(_fix_job(repo, broken, fix), "bisect-x-1", bug=7)
    risk = text.split("[Where problems could occur]", 1)[1].split("[Other Info]", 1)[0]
    assert "setup()" in risk and "drivers/f.c" in risk and "nvme-snapshot-read" in risk
    assert not re.search(r"\b(none|low)\b", risk, re.I), risk
    assert "BugLink: https://bugs.launchpad.net/bugs/7" in text


def test_default_target_is_the_tip_of_the_branch_the_endpoint_is_on(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, (broken, _, fix) = history
    result = _fix_job(repo, broken, fix)
    git(repo, "branch", "-q", "stable", broken)  # the release line: the endpoint, no fix
    git(repo, "checkout", "-q", "stable")
    (repo / "README").write_text("stable\n")
    git(repo, "add", "README")
    git(repo, *ID, "commit", "-q", "-m", "stable: another change")
    tip = git(repo, "rev-parse", "stable").strip()
    done = write_sru_patch(result, "j", tmp_path / "o", SruOptions(signoff=SENDER))
    assert (done.target, done.target_name) == (tip, "stable")  # master has the fix: not it


def test_a_patch_that_does_not_apply_to_the_branch_tip_is_one_clear_line(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, (broken, _, fix) = history
    result = _fix_job(repo, broken, fix)
    git(repo, "checkout", "-q", "-b", "stable", broken)
    _commit(repo, SOURCE.replace("{v}", "2"), "stable: setup returns 2")  # the same lines
    tip = git(repo, "rev-parse", "stable").strip()
    with pytest.raises(UserError) as err:
        write_sru_patch(result, "j", tmp_path / "o", SruOptions(signoff=SENDER))
    text = str(err.value)
    assert "\n" not in text, text
    assert text.startswith(f"the patch does not apply to stable ({tip[:12]}): ")
    assert "drivers/f.c" in text and text.endswith("pass --target the branch it is for")


def test_with_no_branch_left_without_the_fix_it_says_so(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, (broken, _, fix) = history  # master, the only branch, has the fix
    done = write_sru_patch(
        _fix_job(repo, broken, fix), "j", tmp_path / "o", SruOptions(signoff=SENDER)
    )
    assert done.target == broken
    assert done.notes[0].startswith(f"no branch here holds {broken[:12]} without the fix")


CHECKPATCH = ("scripts/checkpatch.pl", "scripts/spelling.txt", "scripts/const_structs.checkpatch")


@pytest.fixture(scope="module")
def tree_checkpatch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real tree's checkpatch.pl and its data files (Debian's linux-source-6.1): from the
    lab base's cached import when there is one (a second), else from the tarball."""
    import shutil

    from kbisect import settings
    from kbisect.infra.lab import base_repo_path

    tarball = settings.KERNEL_SOURCE_TARBALL
    if not tarball.exists() or shutil.which("perl") is None:
        pytest.skip(f"the real tree's checkpatch needs {tarball} and perl (infra/install.sh)")
    out = tmp_path_factory.mktemp("checkpatch")
    base = base_repo_path(tarball)
    if (base / "refs/heads/import").exists():
        archive = subprocess.run(
            ["git", "-C", str(base), "archive", "refs/heads/import", "--", *CHECKPATCH],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    else:
        subprocess.run(
            ["tar", "-xJf", str(tarball), "-C", str(out), "--strip-components=1", "--wildcards"]
            + [f"*/{f}" for f in CHECKPATCH],
            check=True,
        )
    assert all((out / f).is_file() for f in CHECKPATCH)
    return out


def _with_checkpatch(repo: Path, scripts: Path, at: str) -> str:
    """`at` with the real checkpatch files added: a kernel tree's tip, as far as it goes."""
    git(repo, "checkout", "-q", "-b", "stable", at)
    for f in CHECKPATCH:
        (repo / f).parent.mkdir(exist_ok=True)
        (repo / f).write_bytes((scripts / f).read_bytes())
    git(repo, "add", "scripts")
    git(repo, *ID, "commit", "-q", "-m", "scripts: checkpatch")
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("onto", [0, 1], ids=["backported", "cherry picked"])
def test_the_real_checkpatch_finds_no_errors_in_a_backport(
    history: tuple[Path, list[str]], tmp_path: Path, tree_checkpatch: Path, onto: int
) -> None:
    repo, commits = history
    result = _fix_job(repo, commits[onto], commits[2])
    tip = _with_checkpatch(repo, tree_checkpatch, commits[onto])
    done = write_sru_patch(result, "j", tmp_path / "o", SruOptions(bug=7, signoff=SENDER))
    assert done.target == tip and done.provenance == ["backported", "cherry picked"][onto]
    assert re.fullmatch(
        r"total: 0 errors, 0 warnings, \d+ lines checked \(GIT_COMMIT_ID ignored: the SRU "
        rf"provenance line '\({done.provenance} from commit X\)' is Ubuntu's required form\)",
        done.checkpatch,
    ), done.checkpatch
    assert not [n for n in done.notes if "checkpatch" in n], done.notes


def test_an_original_without_its_authors_signoff_is_one_error_explained(
    history: tuple[Path, list[str]], tmp_path: Path, tree_checkpatch: Path
) -> None:
    """With no Signed-off-by before it, checkpatch would check the provenance line too: its
    GIT_COMMIT_ID error stays ignored, NO_AUTHOR_SIGN_OFF is the one left, with a note."""
    repo, (_, other, _) = history
    git(repo, "checkout", "-q", "-b", "unsigned", other)
    fix = _commit(repo, SOURCE.replace("{v}", "0").replace(";\n\n", ";\n/* x */\n", 1), "fix")
    tip = _with_checkpatch(repo, tree_checkpatch, other)
    done = write_sru_patch(
        _fix_job(repo, other, fix), "j", tmp_path / "o", SruOptions(signoff=SENDER, target=tip)
    )
    assert done.checkpatch.startswith("total: 1 errors, 0 warnings, "), done.checkpatch
    assert "(GIT_COMMIT_ID ignored: the SRU provenance line" in done.checkpatch
    (note,) = [n for n in done.notes if "checkpatch" in n]
    assert note.startswith("checkpatch's NO_AUTHOR_SIGN_OFF error: the original commit has no")
    assert "(Ada Author <ada@example.com>)" in note


def test_a_revert_is_checked_with_every_rule(
    history: tuple[Path, list[str]], tmp_path: Path, tree_checkpatch: Path
) -> None:
    """'This reverts commit X.' is checkpatch's own exemption: nothing is ignored."""
    repo, (_, other, fix) = history
    result = _fix_job(repo, other, fix)
    v = make_verify_commit(Git(repo), fix, onto=fix, revert=True)
    assert v.commit
    result.mode, result.old, result.new = Mode.REGRESSION, [other], fix
    result.verification = Verification(
        kind="revert", change=fix, onto=fix, status="confirmed", message="ok", commit=v.commit
    )
    tip = _with_checkpatch(repo, tree_checkpatch, fix)
    opts = SruOptions(bug=7, signoff=SENDER, target=tip)
    done = write_sru_patch(result, "j", tmp_path / "o", opts)
    assert done.provenance == "revert"
    assert re.fullmatch(r"total: 0 errors, 0 warnings, \d+ lines checked", done.checkpatch)


def finished_fix_job_sru(
    lab: Path,
    truth: dict[str, object],
    out: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[list[Path], str]:
    """`kbisect report JOB --sru-patch OUT ...` on a finished fix-mode job of a lab, with the
    result as the CLI gets it: the verification commit made by the worker's own function,
    the result through Temporal's data converter, the client's result() answering it."""
    from temporalio.converter import DataConverter

    from kbisect.jobs.client import JobClient
    from kbisect.main import main

    old, new, fix = str(truth["old"]), str(truth["new"]), str(truth["culprit"])
    v = make_verify_commit(Git(lab), fix, onto=old, revert=False)
    assert v.commit, v.error
    subject = git(lab, "show", "-s", "--format=%s", fix).strip()
    finished = BisectResult(
        status="found",
        mode="fix",
        testcase="nvme-snapshot-read",
        repo=str(lab),
        old=[old],
        new=new,
        culprit=fix,
        candidates=[fix],
        steps=[
            Step(old, "old", "bad", "endpoint", value=8.0, index=-1, boots=2),
            Step(new, "new", "good", "endpoint", value=512.0, index=9, boots=2),
            Step(fix, subject, "good", "test", value=512.0, index=3, boots=2),
        ],
        message="first good commit",
        subjects={fix: subject},
        metric="avg_read_sectors",
        unit="sectors",
        verification=Verification(
            kind="backport",
            change=fix,
            onto=old,
            status="confirmed",
            message="fixed",
            commit=v.commit,
        ),
    )
    convert = DataConverter.default.payload_converter
    (result,) = convert.from_payloads(convert.to_payloads([finished]), [BisectResult])
    assert isinstance(result, BisectResult)

    class Finished:
        async def describe(self, job_id: str) -> SimpleNamespace:
            return SimpleNamespace(workflow_type=WORKFLOW)  # a bisection, not a sweep

        async def result(self, job_id: str) -> BisectResult:
            assert job_id == "bisect-nvme-snapshot-read-0badf1x0"
            return result

    async def connect(settings: object) -> Finished:
        return Finished()

    monkeypatch.setattr(JobClient, "connect", connect)
    code = main(
        [
            "report",
            "bisect-nvme-snapshot-read-0badf1x0",
            "--no-start",  # the client is the stand-in above: no service to start
            "--sru-patch",
            str(out),
            "--series",
            "jammy",
            "--bug",
            "2012345",
            "--signoff",
            SENDER,
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    files = [Path(line) for line in printed.out.splitlines()]
    assert [f.parent for f in files] == [out, out] and sorted(out.iterdir()) == files
    return files, printed.err


def git_am_on_old_endpoint(lab: Path, old: str, files: list[Path], clone: Path) -> str:
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(lab), str(clone)], check=True)
    git(clone, "checkout", "-q", old)
    git(clone, *ID, "am", "-q", "--empty=drop", *map(str, files))
    return git(clone, "log", "-1", "--format=%B")


def test_sru_patch_of_a_finished_fix_lab_job_through_the_cli(
    tmp_path: Path,
    tiny_tarball: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kbisect.infra.lab import LabOptions, create_lab

    lab = tmp_path / "lab"
    truth = create_lab(lab, LabOptions(commits=6, mode="fix", culprit_at=3, seed=5))
    files, err = finished_fix_job_sru(lab, truth, tmp_path / "sru", monkeypatch, capsys)
    assert files[0].name == "0000-cover-letter.patch" and files[1].name.startswith("0001-")
    cover = files[0].read_text()
    assert "[SRU][Jammy][PATCH 0/1]" in cover and "to Jammy, with the trailers" in cover
    assert f"no branch here holds {str(truth['old'])[:12]} without the fix" in err
    message = git_am_on_old_endpoint(lab, str(truth["old"]), files, tmp_path / "clone")
    assert message.startswith(git(lab, "show", "-s", "--format=%s", str(truth["culprit"])))
    assert "BugLink: https://bugs.launchpad.net/bugs/2012345" in message
    assert message.strip().endswith(f"Signed-off-by: {SENDER}")


FAKE_CHECKPATCH = """#!/usr/bin/perl
# The tree's script as kbisect runs it: its environment, and a commit id looked up as
# checkpatch's git_commit_info does (git in its working directory).
open(my $out, '>', '{out}') or die;
print $out "$_=$ENV{{$_}}\\n" for sort keys %ENV;
my $found = `git log --no-color --format='%H' -1 {commit} 2>&1`;
print $out "found $found";
print "total: 0 errors, 0 warnings, 1 lines checked\\n";
"""


def test_the_trees_checkpatch_gets_no_secret_nor_git_variable_and_still_finds_commits(
    history: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree's checkpatch.pl is the tree's code: it runs with PATH, LC_ALL and a HOME of
    its own only, never the user's keys (KBISECT_*, tokens) or a GIT_DIR to their repository;
    it still looks commit ids up, as the real one does to check them."""
    from kbisect.reports.sru_patch import checkpatch

    repo, (*_, fix) = history
    out = tmp_path / "env.txt"
    scripts = {
        "scripts/checkpatch.pl": FAKE_CHECKPATCH.format(out=out, commit=fix[:12]),
        "scripts/spelling.txt": "",
        "scripts/const_structs.checkpatch": "",
    }
    for name, text in scripts.items():
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "scripts")
    git(repo, *ID, "commit", "-q", "-m", "scripts: checkpatch")
    tip = git(repo, "rev-parse", "HEAD").strip()
    monkeypatch.setenv("KBISECT_TEST_SECRET", "s3cret")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    patch = tmp_path / "0001-x.patch"
    patch.write_text("Subject: x\n\n---\n")
    summary, _ = checkpatch(Git(repo), tip, patch, SENDER)
    assert summary == "total: 0 errors, 0 warnings, 1 lines checked"
    *variables, found = out.read_text().splitlines()
    env = dict(v.split("=", 1) for v in variables)
    assert sorted(set(env) - {"PATH", "LANG", "LC_ALL", "HOME"}) == []  # names, no values
    assert "s3cret" not in out.read_text()
    assert env["HOME"] != str(Path.home()) and not Path(env["HOME"]).is_relative_to(repo)
    assert found == f"found {fix}"  # the user's objects, read through alternates
    assert git(repo, "status", "--porcelain") == ""  # the user's repository untouched


def test_the_series_is_the_tree_s_own_or_the_one_given_never_a_default(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The note said "in Jammy" (kbisect's default) for a Debian 6.1 tree, and put the
    --repo path of the host it ran on in its Test Plan."""
    from kbisect.builders.distro_series import series_of
    from kbisect.reports.sru_patch import patch_series

    repo, (broken, _, fix) = history
    result = _fix_job(repo, broken, fix)
    note = sru_note(result, "j")
    assert "Jammy" in note and str(repo) not in note and str(tmp_path) not in note, note
    assert "Bionic" in sru_note(result, "j", series="bionic")
    (repo / "debian" / "changelog").write_text(
        "linux (6.1.76-1) bookworm-security; urgency=high\n\n  * x\n"
    )
    git(repo, "commit", "-qam", "debian: 6.1.76-1")
    assert series_of(repo, git(repo, "rev-parse", "HEAD").strip()) == "bookworm"
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    head = _commit(upstream, "int a;\n", "drivers: a")
    assert series_of(upstream, head) is None
    with pytest.raises(UserError, match=r"^give --series NAME: master has no debian/changelog"):
        patch_series(None, str(upstream), head, "master")
    with pytest.raises(UserError, match="give a release's code name"):
        patch_series("Jammy; rm", str(upstream), head, "master")
    assert patch_series("noble", str(upstream), head, "master") == "noble"
