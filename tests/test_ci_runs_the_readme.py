"""CI runs the README's test command, and that command keeps timed guests off shared cores."""

import re
from pathlib import Path

from tests.conftest import E2E_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_s_test_command() -> None:
    (line,) = [s.strip() for s in (ROOT / "README.md").read_text().splitlines()
               if s.startswith("    infra/install.sh --tests && ")]  # fmt: skip
    command = line.partition(" && ")[2]
    steps = [s for s in (ROOT / ".ci/run").read_text().splitlines() if s and s[0] != "#"]
    assert "infra/install.sh --tests" in steps and steps[-1] == command, steps


def test_the_e2e_tier_runs_alone_and_its_tests_share_one_host_lock() -> None:
    tiers = re.findall(r"^tier (.*)$", (ROOT / "tests/run").read_text(), re.M)
    assert [t.split('"')[1] if t.count('"') > 2 else t.split()[1] for t in tiers] == [
        "not e2e and not server",
        "server and not e2e",
        "e2e",
    ], tiers
    # Two at a time at most, each test file on one worker (its session fixtures once): their
    # guests and builds go through one host lock (tests/conftest.py), which times a guest alone.
    e2e = tiers[-1].split()
    assert e2e[e2e.index("-n") + 1] == "2" and e2e[e2e.index("--dist") + 1] == "loadfile", e2e
    # in collection order (E2E_FIRST first): each of them is a file of the tier
    assert "--no-loadscope-reorder" in e2e, e2e
    assert all((ROOT / "tests/e2e" / name).is_file() for name in E2E_FIRST)
