"""`kbisect backport`'s bad input: one line that says what to do, before any service."""

from pathlib import Path
from typing import Any

import pytest

from kbisect.main import main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["backport", "bisect-x-1"], "give --target REV"),
        (["backport", "--change", "x", "--target", "y"], "--change needs --repo DIR"),
        (["backport", "--tree", "ubuntu", "--change", "x"], "--tree is for a bisection's"),
        (["backport", "--target", "y"], "give a bisection's job id, or --repo DIR --change"),
        (["backport", "bisect-x-1", "--change", "x", "--target", "y"],
         "give a bisection's job id, or --repo DIR --change"),
        (["backport", "bisect-x-1", "--target", "y", "--boots", "0"], "--boots 0: give 1 to"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_before_any_service(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--no-start"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_a_revision_or_testcase_by_hand_that_is_not_there_says_so(
    distro_lab: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, truth = distro_lab
    base = ["backport", "--repo", str(repo), "--change", truth["culprit"]]
    assert main([*base, "--target", "no-such-branch", "--testcase", "boots", "--no-start"]) == 2
    assert "unknown revision 'no-such-branch'" in capsys.readouterr().err
    assert main([*base, "--target", "lab-distro", "--testcase", "nope", "--no-start"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main([*base, "--target=--upload-pack=x", "--testcase", "boots", "--no-start"]) == 2
    assert "--upload-pack" in capsys.readouterr().err
