"""Config bisection's first step on a real kernel tree: two configs through kbisect's
layers (both as --config builds take a config), and their differing options in the groups
the tree's own Kconfig moves together (olddefconfig one option at a time). The good config
is the seed testcase's (tinyconfig and its fragment), the bad one it plus lock debugging:
PROVE_LOCKING selects LOCKDEP and DEBUG_LOCK_ALLOC, which join its group."""

from pathlib import Path

import pytest

from kbisect.builders.config_groups import NOT_SET, cumulative, differing, groups, parse, render
from kbisect.builders.kernel_build import settling
from kbisect.infra.git import Git
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec
from tests.e2e.service import SEED

pytestmark = pytest.mark.e2e

DEBUG = "CONFIG_DEBUG_KERNEL=y\nCONFIG_PROVE_LOCKING=y\nCONFIG_DEBUG_ATOMIC_SLEEP=y\n"


def test_options_kconfig_moves_together_come_as_one_group(
    real_lab: tuple[Path, dict[str, object]],
) -> None:
    lab, _ = real_lab
    manifest = manifests.load(SEED)
    commit = Git(lab).resolve("lab-good")
    with settling(lab, commit, build_spec(manifest)) as tree:
        seed = tree.normalized(build_spec(manifest))  # tinyconfig and the fragment
        good = tree.normalized(build_spec(manifest, seed))
        bad = tree.normalized(build_spec(manifest, seed + DEBUG))
        found = groups(parse(good), parse(bad), lambda o: parse(tree.settled(render(o))))
    leads = [g.lead for g in found]
    assert leads[0] == "CONFIG_PROVE_LOCKING" and "CONFIG_DEBUG_ATOMIC_SLEEP" in leads, leads
    locking = found[leads.index("CONFIG_PROVE_LOCKING")]
    assert locking.options.get("CONFIG_LOCKDEP") == "y", locking.words
    assert locking.options.get("CONFIG_DEBUG_LOCK_ALLOC") == "y", locking.words
    # every option the bad config changed is in exactly one group, and the last
    # cumulative config reads as the bad one
    moved = [k for g in found for k in g.options]
    assert len(moved) == len(set(moved))
    last = cumulative(parse(good), found)[-1]
    wanted = differing(parse(good), parse(bad))
    assert all(last.get(k, NOT_SET) == v for k, v in wanted.items()), wanted
    print(f"{len(found)} groups: " + "; ".join(g.words for g in found))
