"""The draft SRU note and the verification section of the report."""

import subprocess
from pathlib import Path

import pytest

from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.reports.job_report import markdown, to_json
from kbisect.reports.sru_note import sru_note
from kbisect.workflows.bisect_types import BisectResult, Step, Verification
from tests.kbisect.test_report import _repo


def _job(repo: str, h: list[str], mode: str) -> BisectResult:
    slow = {"avg_read_sectors": 8.0, "reads": 65664.0}
    fast = {"avg_read_sectors": 512.0, "reads": 1026.0}
    old_values, new_values = (fast, slow) if mode == "regression" else (slow, fast)
    steps = [
        Step(h[0], "change 0", "good", "endpoint", values=old_values, position=0.0),
        Step(h[-1], f"change {len(h) - 1}", "bad", "endpoint", values=new_values, position=1.0),
        Step(h[2], "change 2", "bad", "test", values=new_values, position=1.0),
    ]
    return BisectResult(
        status="found",
        mode=mode,
        testcase="nvme-snapshot-read",
        repo=repo,
        old=[h[0]],
        new=h[-1],
        culprit=h[2],
        candidates=[h[2]],
        steps=steps,
        message="m",
        subjects={h[2]: "change 2"},
        metric="avg_read_sectors",
        unit="sectors",
        profile="ebs-gp2",
        repetitions=3,
        verification=Verification(
            kind="revert" if mode == "regression" else "backport",
            change=h[2],
            onto=h[-1] if mode == "regression" else h[0],
            status="confirmed",
            message="avg_read_sectors is 512, like the old endpoint",
            commit="f" * 40,
            value=512.0,
        ),
    )


def test_regression_note_reverts_with_the_evidence(tmp_path: Path) -> None:
    h = _repo(tmp_path / "r", 4)
    note = sru_note(_job(str(tmp_path / "r"), h, "regression"), "job-7")
    sections = ("[Impact]", "[Fix]", "[Test Plan]", "[Where problems could occur]", "[Other Info]")
    places = [note.index(section) for section in sections]
    assert places == sorted(places)  # every section, in the SRU template's order
    assert "is 8 sectors on affected kernels, against 512 sectors" in note
    assert "(was 1026)" not in note  # other metrics' last boots: never one boot's value
    assert f'Revert commit {h[2]} ("change 2")' in note
    assert "verification (revert): confirmed" in note
    assert "\n    f | 2 +-\n" in note  # the files it touches, from the repository
    assert "--testcase nvme-snapshot-read --profile ebs-gp2 --repetitions 3" in note
    assert "t <t@t>" in note  # the author, read from the repository


def test_regression_note_finds_the_upstream_fix(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    h = _repo(repo, 4)
    # A later commit on another branch says it fixes the culprit.
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(repo), "checkout", "-qb", "upstream"], check=True)
    message = f'block: merge again\n\nFixes: {h[2][:12]} ("change 2")'
    subprocess.run(
        ["git", "-C", str(repo), *ident, "commit", "-q", "--allow-empty", "-m", message],
        check=True,
    )
    fix = Git(repo).resolve("upstream")
    note = sru_note(_job(str(repo), h, "regression"), "job-7")
    assert f'    {fix} ("block: merge again")' in note
    assert "Backport the commit that fixes it" in note


def test_fix_note_is_a_backport() -> None:
    h = [f"{i:040x}" for i in range(4)]
    note = sru_note(_job("/nonexistent", h, "fix"), "job-8")
    assert f'Backport commit {h[2]} ("change 2")' in note
    assert f"(cherry picked from commit {h[2]})" in note
    # In fix mode the old endpoint is the affected one.
    assert "is 8 sectors on affected kernels, against 512 sectors" in note
    assert "verification (backport): confirmed" in note


def test_the_impact_says_what_the_explain_boots_found() -> None:
    h = [f"{i:040x}" for i in range(4)]
    why = ["nvme0n1 read request size (sectors): 512 -> 8 (-98%, 95% CI -99% to -98%)"]
    note = sru_note(_job("/nonexistent", h, "fix"), "job-8", why=why)
    impact = note.split("[Impact]")[1].split("[Fix]")[0]
    assert "the culprit's boots against its parent's:" in impact and why[0] in impact
    assert "against its parent" not in sru_note(_job("/nonexistent", h, "fix"), "job-8")


def test_the_impact_quotes_the_medians_of_the_boots_and_the_effect_with_its_interval() -> None:
    h = [f"{i:040x}" for i in range(4)]
    result = _job("/nonexistent", h, "regression")
    for step, value, boots in zip(result.steps[:2], (83.5, 69.3), (12, 10), strict=True):
        step.value, step.boots = value, boots  # the endpoints' medians; their last boots differ
    result.effect = "-17.0% (95% CI -21.0% to -13.0%; 12+10 boots)"
    impact = sru_note(result, "job-7").split("[Impact]")[1].split("[Fix]")[0]
    assert "is 69.3 sectors on affected kernels, against 83.5 sectors" in impact
    assert "(medians of 10 and 12 boots)" in impact
    assert "The new endpoint against the old: -17.0% (95% CI -21.0% to -13.0%" in impact
    for step in result.steps[:2]:
        step.boots = 1  # a counter's one boot a side: no "medians of 1 and 1 boots"
    once = sru_note(result, "job-7").split("[Impact]")[1].split("[Fix]")[0]
    assert "on good ones (one boot of each)." in once and "medians" not in once


def test_no_note_without_one_commit() -> None:
    h = [f"{i:040x}" for i in range(4)]
    result = _job("/nonexistent", h, "regression")
    result.culprit, result.status = None, "ambiguous"
    with pytest.raises(UserError, match="did not name one commit"):
        sru_note(result, "job-9")


def test_report_shows_the_verification() -> None:
    h = [f"{i:040x}" for i in range(4)]
    result = _job("/nonexistent", h, "regression")
    md = markdown(result, "job-7")
    head = f"- verification: **confirmed**, revert of {h[2][:12]}: avg_read_sectors is 512, like"
    assert head in md
    data = to_json(result)
    assert data["verification"]["status"] == "confirmed"  # type: ignore[index]


def test_plot_marks_the_verification(tmp_path: Path) -> None:
    from matplotlib.colors import to_rgb

    from kbisect.reports.plot import VERIFY_COLOUR, plot_data, plot_scores
    from tests.kbisect.test_report import _colour_pixels

    h = [f"{i:040x}" for i in range(4)]
    result = _job("/nonexistent", h, "regression")
    for step, (index, value) in zip(result.steps, ((-1, 512.0), (3, 8.0), (1, 8.0)), strict=True):
        step.index, step.value = index, value
    star = plot_data(result).star
    # The revert was made on the new endpoint (index 3): the star stands right of it.
    assert star is not None and (star.x, star.y) == (4, 512.0)
    change = result.verification.change[:12] if result.verification else ""
    assert star.label == f"{change} reverted on new: confirmed"  # the star names the change
    blue = to_rgb(VERIFY_COLOUR)
    assert _colour_pixels(plot_scores(result, tmp_path / "v.png"), blue) > 20
    result.verification = None
    assert plot_data(result).star is None
    assert _colour_pixels(plot_scores(result, tmp_path / "n.png"), blue) == 0
