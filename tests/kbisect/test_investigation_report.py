"""An investigation's report: its stages in order, each in its own report's words, a stage
line from a guest or a repository shown as text, and the JSON's stages with their answers."""

from pathlib import Path

from markdown_it import MarkdownIt

from kbisect.contract import BACKPORT_WORKFLOW, SWEEP_WORKFLOW, WORKFLOW
from kbisect.reports.investigation_report import Answers, markdown, to_json
from kbisect.workflows.bisect_types import BisectResult, Step
from kbisect.workflows.investigation_types import InvestigationResult, Stage
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepResult

OLD, NEW, CULPRIT = "a" * 40, "b" * 40, "c" * 40


def _answers(tmp_path: Path) -> Answers:
    check = SweepResult(str(tmp_path), [NEW, OLD], ["distro", "base"], ["s", "t"], [],
                        [SweepPair("t", "m", "u", 0, 1, PairWord.SAME)], [], 4)  # fmt: skip
    bisection = BisectResult(
        "found", "fix", "t", str(tmp_path), [OLD], NEW, CULPRIT, [CULPRIT],
        [Step(commit=CULPRIT, subject="fix it", verdict="good", source="test", value=1.0)],
        "found it", metric="m",
    )  # fmt: skip
    stages = [
        Stage("check", "inv-1-check", SWEEP_WORKFLOW, "done", "merge base: m same"),
        Stage("bisect", "inv-1-bisect", WORKFLOW, "done", "found: ![x](http://evil/p.png)"),
        Stage("backport", "", BACKPORT_WORKFLOW, "failed", "<img src=x> no host"),
    ]
    result = InvestigationResult(stages, "found", "found it", CULPRIT, "inv-1-bisect", "t")
    return Answers(result, {"inv-1-check": check, "inv-1-bisect": bisection})


def test_the_report_shows_the_stages_in_order_and_others_words_as_text(tmp_path: Path) -> None:
    text = markdown("inv-1", _answers(tmp_path), sru="SRU Justification\n[Impact]")
    assert text.index("## Stages") < text.index("## Check") < text.index("## Bisect")
    assert text.index("## Bisect") < text.index("## SRU draft")
    assert "## Backport" not in text  # a failed stage has no answer: its line says why
    assert "\n### Tested commits" in text and "\n## Tested commits" not in text
    html = MarkdownIt().render(text)
    assert "<img" not in html and "<a " not in html  # the guest's image is text
    assert "&lt;img src=x&gt; no host" in html


def test_the_json_has_each_stage_with_its_answer(tmp_path: Path) -> None:
    got = to_json("inv-1", _answers(tmp_path))
    assert [s["name"] for s in got["stages"]] == ["check", "bisect", "backport"]
    assert got["stages"][1]["answer"]["culprit"] == CULPRIT
    assert "answer" not in got["stages"][2] and got["bisection"] == "inv-1-bisect"
