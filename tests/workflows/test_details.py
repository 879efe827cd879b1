"""The Web UI's current details: a compact table, the shared kernels a count."""

from kbisect.workflows.bisect_types import Progress, Step
from kbisect.workflows.details import details_markdown


def test_current_details_fit_the_panel_and_fold_the_shared_kernels() -> None:
    a, b, c, d = (x * 40 for x in "abcd")
    p = Progress(status="bisecting", testcase="t", metric="avg_read_sectors", unit="sectors")
    p.old, p.new, p.building = [a], b, {c: "nvme: set nomerges"}
    p.steps = [
        Step(a, "old", "good", "endpoint", value=512.0, boots=1),
        Step(b, "new", "bad", "endpoint", value=8.0, boots=1),
        Step(d, "x" * 80, "good", "same-kernel", note="touches no file", same_as=a),
        Step(c, "y" * 80, "skip", "build-failed"),
    ]
    text = details_markdown(p, {})
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "| # | commit | subject | verdict | score | boots |"
    assert rows[1:] == [
        f"| 1 | `{a[:12]}` | old | good | 512 | 1 |",
        f"| 2 | `{b[:12]}` | new | bad | 8 | 1 |",
        f"| 4 | `{c[:12]}` | {'y' * 32} | skip: build-failed |  | 0 |",
    ]
    assert "score: avg_read_sectors (sectors)" in text
    assert f"building now: `{c[:12]}`" in text
    assert "1 more: commits that share a booted kernel" in text
