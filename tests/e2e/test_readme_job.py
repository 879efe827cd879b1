"""The README's main job, piped, prints every line the README quotes (its progress on
stderr, its answer on stdout), on the shared lab."""

import re
from pathlib import Path

import pytest

from tests.e2e.service import bisect_on_own_service, uncache

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"


def quoted_blocks(text: str) -> tuple[list[str], list[str]]:
    """The README's piped progress lines and its answer lines (the indented blocks after
    'one plain line per event' and 'the answer, on stdout')."""

    def block_after(marker: str) -> list[str]:
        rest = text[text.index(marker) :].splitlines()[1:]
        start = next(i for i, line in enumerate(rest) if line.startswith("    "))
        lines = []
        for line in rest[start:]:
            if not line.startswith("    "):
                break
            lines.append(line.strip())
        return lines

    return block_after("one plain line per event"), block_after("the answer, on stdout")


def pattern(quoted: str) -> "re.Pattern[str]":
    """A quoted line as a regex: <placeholder> is some text, '...' any text."""
    parts = re.split(r"(<[^>]+>|\.\.\.)", quoted)
    return re.compile(
        "".join(".+?" if p.startswith("<") else ".*" if p == "..." else re.escape(p) for p in parts)
    )


def test_quoted_lines_become_patterns() -> None:
    assert pattern("boot 1: <commit> boot 1: x <value>").fullmatch("boot 1: abc boot 1: x 8")
    assert not pattern("step 1: <commit> good (endpoint)").fullmatch("step 1: abc good")
    progress, answer = quoted_blocks(README.read_text())
    assert progress[0] == "validating" and any(line.startswith("found:") for line in progress)
    assert answer and answer[0].startswith("first bad commit:")


def test_the_readme_job_prints_every_line_it_quotes(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    uncache(lab, ["lab-good"], "nvme-snapshot-read")  # a build long enough for a poll to see
    args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    args += ["--testcase", "nvme-snapshot-read", "--repetitions", "1"]
    proc = bisect_on_own_service(tmp_path, args, timeout=1700, as_json=False)
    progress, answer = quoted_blocks(README.read_text())
    for quoted, printed in ((progress, proc.stderr), (answer, proc.stdout)):
        lines = printed.splitlines()
        missing = [q for q in quoted if not any(pattern(q).fullmatch(line) for line in lines)]
        assert not missing, (missing, printed[-4000:])
    assert f"first bad commit: {truth['culprit']}" in proc.stdout
