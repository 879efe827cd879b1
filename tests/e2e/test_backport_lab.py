"""The seed's whole way for real, as one investigation: a distro branch forked from a
fix-mode lab's old endpoint, whose fix needs an earlier upstream refactor. `bisect
--cross-tree --target` checks the merge base, bisects the fix upstream (fix mode: the fix
alone does not apply to the old end, and the verification says so), explains it, and
backports it with that prerequisite to the distro tip, built without and with them and
booted in QEMU: verified. Explain's answer says what the seed's engineer found by hand (the
request size, in diskstats and in blktrace) and draws its flame graph. A branch that already
carries the fix under another hash builds nothing."""

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.git import Git
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.workflows.investigation_types import StageName, stage_id
from tests.e2e.service import KBISECT, SEED, on_own_service, own_service, watch_job

pytestmark = pytest.mark.e2e


def _with_fix_picked(lab: Path, truth: dict[str, object], tmp_path: Path) -> str:
    """The distro tip with the prerequisite and the fix cherry-picked as stable does."""
    tip, fix, prereq = truth["distro"]["tip"], truth["culprit"], truth["prerequisite"]  # type: ignore[index]
    wt = tmp_path / "wt"
    who = ["-c", "user.name=Stable", "-c", "user.email=stable@example.org"]
    subprocess.run(["git", "-C", str(lab), "worktree", "add", "-q", "-b", "fixed", str(wt), tip],
                   check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(wt), *who, "cherry-pick", str(prereq), str(fix)],
                   check=True, capture_output=True)  # fmt: skip
    message = f"NVMe: Allow request merges\n\ncommit {fix} upstream.\n"
    subprocess.run(["git", "-C", str(wt), *who, "commit", "-q", "--amend", "-m", message],
                   check=True)  # fmt: skip
    return "fixed"


def _lab(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A fix-mode lab whose distro branch forked from its old end; its fix needs a
    prerequisite."""
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    options = LabOptions(commits=6, mode="fix", culprit_at=4, seed=62, distro=3,
                         fix_needs_prereq=True)  # fmt: skip
    return tmp_path / "lab", create_lab(tmp_path / "lab", options)


def _started(env: dict[str, str], args: list[str]) -> str:
    """`kbisect bisect ARGS` killed (-9) right after it prints the job id: the id."""
    cli = subprocess.Popen([*KBISECT, "bisect", *args, "--no-start"], env=env, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    assert cli.stderr is not None
    seen = []
    for line in cli.stderr:
        seen.append(line)
        if line.startswith("job inv-"):
            cli.kill()
            cli.wait()
            return line.split()[1]
    raise AssertionError("no job id printed: " + "".join(seen)[-2000:])


def test_the_chain_from_a_distro_branch_outlives_its_terminal_and_verifies_the_backport(
    tmp_path: Path,
) -> None:
    """The seed's whole way as one investigation: the distro kernel's merge base checked,
    the fix bisected upstream from it, explained, and backported (with its prerequisite) to
    the distro tip, built and booted there: "verified". The CLI is killed the moment it
    prints the id; `kbisect watch` shows it all."""
    lab, truth = _lab(tmp_path)
    fix, prereq = str(truth["culprit"]), str(truth["prerequisite"])
    args = ["--repo", str(lab), "--mode", "fix", "--cross-tree", "--good", "lab-good"]
    args += ["--bad", "lab-distro", "--target", "lab-distro", "--explain"]
    args += ["--testcase", SEED, "--repetitions", "1"]
    with own_service(tmp_path) as env:
        job = _started(env, args)
        result = watch_job(env, job)
        report = subprocess.run([*KBISECT, "report", job, "--no-start"], env=env, text=True,
                                capture_output=True, timeout=300)  # fmt: skip
        flame = tmp_path / "flame.svg"
        bisection = stage_id(job, StageName.BISECT)  # its explain stage is this one's
        explained = subprocess.run([*KBISECT, "explain", bisection, "--flame", str(flame),
                                    "--json", "--no-start"], env=env, text=True,
                                   capture_output=True, timeout=300)  # fmt: skip
        repro = tmp_path / "repro"
        written = subprocess.run([*KBISECT, "reproduce", job, str(repro), "--no-start"], env=env,
                                 text=True, capture_output=True, timeout=300)  # fmt: skip
    assert (result["status"], result["culprit"]) == ("found", fix), result["message"]
    # Fix mode upstream: the merge base (the old end) is bad, the new end good. The fix
    # alone does not apply to the old end (it needs its prerequisite): the verification
    # says so and where to go, and the backport stage takes both (below).
    assert result["mode"] == "fix"
    ends = {s["commit"]: s["verdict"] for s in result["steps"] if s["source"] == "endpoint"}  # type: ignore[union-attr]
    assert ends == {truth["old"]: "bad", truth["new"]: "good"}, ends
    v = result["verification"]
    assert (v["kind"], v["change"], v["onto"]) == ("backport", fix, truth["old"]), v  # type: ignore[index]
    assert v["status"] == "inconclusive" and "does not apply cleanly" in v["message"], v  # type: ignore[index]
    assert "kbisect backport JOB --target REV" in v["message"], v  # type: ignore[index]
    chain = result["investigation"]
    stages = {s["name"]: s for s in chain["stages"]}  # type: ignore[union-attr]
    assert list(stages) == ["check", "bisect", "explain", "backport"], stages
    assert all(s["state"] == "done" for s in stages.values()), stages
    assert "same" in stages["check"]["line"], stages["check"]
    assert stages["backport"]["line"].startswith("verified"), stages["backport"]
    assert report.returncode == 0, report.stderr[-2000:]
    text = report.stdout
    print(text[:3000])  # the figures, in the log
    for heading in ("## Check", "## Bisect", "## Explain", "## Backport", "## SRU draft"):
        assert heading in text, heading
    assert text.index("## Check") < text.index("## Bisect") < text.index("## Explain")
    assert "read request size (sectors)" in text  # explain's Why, in the report
    assert f"{prereq[:12]}" in text  # the backport took its prerequisite
    _assert_explained(explained, flame)
    # The reproducer without kbisect: the fix and its parent, kbisect's own .config of the
    # fix (built here; its parent may have been judged by a twin's kernel), a script bash
    # reads.
    assert written.returncode == 0, written.stderr[-2000:]
    parent = Git(lab).resolve(f"{fix}^")
    assert (repro / "commits").read_text() == f"culprit {fix}\nparent {parent}\n"
    assert "CONFIG_BLK_DEV_NVME=y" in (repro / "config" / "culprit.config").read_text()
    assert subprocess.run(["bash", "-n", str(repro / "reproduce.sh")]).returncode == 0


def _assert_explained(proc: "subprocess.CompletedProcess[str]", flame: Path) -> None:
    """`kbisect explain` of the chain's bisection: its explain stage, followed, not run again.
    The fix's reads are merged into large requests again, its parent's are 8 sectors, in
    diskstats and in the traced boots' blktrace; the flame graph of both sides' samples."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "explained", result["message"]
    changes = {(c["source"], c["name"]): c for c in result["comparison"]["changes"]}
    sizes = [c for (s, n), c in changes.items() if s == "diskstats" and "rareq-sz" in n]
    assert sizes and min(c["change"] for c in sizes) > 900, sorted(changes)  # 8 -> 512
    merged = [c for (s, n), c in changes.items() if s == "diskstats" and n.endswith("reads merged")]
    assert merged and all(c["parent"] == 0 and c["culprit"] > 1000 for c in merged), merged
    traced = [c for (s, n), c in changes.items() if s == "blktrace" and "request size" in n]
    assert traced and min(c["change"] for c in traced) > 900, sorted(changes)
    svg = ET.parse(flame).getroot()
    assert svg.tag.endswith("svg") and flame.stat().st_size > 2000


def test_a_branch_that_carries_the_fix_already_builds_nothing(tmp_path: Path) -> None:
    lab, truth = _lab(tmp_path)
    fix = str(truth["culprit"])
    by_hand = ["backport", "--repo", str(lab), "--change", fix,
               "--testcase", SEED]  # fmt: skip
    fixed = _with_fix_picked(lab, truth, tmp_path)
    proc = on_own_service(tmp_path, [*by_hand, "--target", fixed], timeout=600)
    again = json.loads(proc.stdout)
    assert again["word"] == "already there" and again["plan"]["found_how"] == "provenance line"
    assert again["pair"] is None and again["boots"] == []  # nothing built, nothing booted
