"""Config bisection's groups: options that Kconfig moves together found by settling the
good config with one option at a time (here a tiny Kconfig of select, depends on and a
default; the real one is `make olddefconfig`)."""

import pytest

from kbisect.builders.config_groups import (
    NOT_SET,
    cumulative,
    differing,
    groups,
    parse,
    render,
)


def settle(options: dict[str, str]) -> dict[str, str]:
    """A Kconfig where DEBUG_A selects DEBUG_B, LOCKDEP depends on DEBUG_KERNEL, and
    KASAN_INLINE defaults to y when KASAN is y; everything else is left as given."""
    out = dict(options)
    if out.get("CONFIG_DEBUG_A") == "y":
        out["CONFIG_DEBUG_B"] = "y"
    if out.get("CONFIG_DEBUG_KERNEL", NOT_SET) != "y":
        out["CONFIG_LOCKDEP"] = NOT_SET
    if out.get("CONFIG_ZSTD", NOT_SET) != "y":  # a dependency named after what needs it
        out["CONFIG_AUDIT_ZSTD"] = NOT_SET
    if out.get("CONFIG_KASAN") == "y" and "CONFIG_KASAN_INLINE" not in options:
        out["CONFIG_KASAN_INLINE"] = "y"
    return out


GOOD = "CONFIG_X=y\n# CONFIG_DEBUG_A is not set\n# CONFIG_DEBUG_B is not set\nCONFIG_HZ=250\n"
BAD = (
    "CONFIG_X=y\nCONFIG_DEBUG_A=y\nCONFIG_DEBUG_B=y\nCONFIG_HZ=1000\nCONFIG_LOCKDEP=y\n"
    "CONFIG_DEBUG_KERNEL=y\nCONFIG_KASAN=y\nCONFIG_KASAN_INLINE=y\n"
)


def test_a_config_reads_set_and_unset_options_and_writes_them_back() -> None:
    good = parse(GOOD + '# a comment\n\nCONFIG_NAME="a b"\n')
    assert good["CONFIG_DEBUG_A"] == NOT_SET and good["CONFIG_NAME"] == '"a b"'
    assert parse(render(good)) == good
    assert differing(parse(GOOD), parse(BAD))["CONFIG_HZ"] == "1000"
    assert "CONFIG_X" not in differing(parse(GOOD), parse(BAD))


def test_options_kconfig_moves_together_are_one_group_and_a_dependency_comes_first() -> None:
    good, bad = parse(GOOD), parse(BAD)
    found = groups(good, bad, settle)
    leads = [g.lead for g in found]
    # DEBUG_A brings DEBUG_B and KASAN brings KASAN_INLINE (they go first: they move the
    # most); LOCKDEP waits for DEBUG_KERNEL
    assert leads == [
        "CONFIG_DEBUG_A",
        "CONFIG_KASAN",
        "CONFIG_DEBUG_KERNEL",
        "CONFIG_HZ",
        "CONFIG_LOCKDEP",
    ], leads
    assert found[0].options == {"CONFIG_DEBUG_A": "y", "CONFIG_DEBUG_B": "y"}
    assert found[0].words == "CONFIG_DEBUG_A=y (with CONFIG_DEBUG_B=y)"
    configs = cumulative(good, found)
    assert configs[0] == good and len(configs) == len(found) + 1
    assert all(configs[-1].get(k, NOT_SET) == v for k, v in differing(good, bad).items())


def test_an_option_whose_dependency_sorts_after_it_is_taken_once_that_is() -> None:
    bad = {**parse(GOOD), "CONFIG_AUDIT_ZSTD": "y", "CONFIG_ZSTD": "y"}
    found = groups(parse(GOOD), bad, settle)
    assert [g.lead for g in found] == ["CONFIG_ZSTD", "CONFIG_AUDIT_ZSTD"]


def test_an_option_that_selects_another_leads_its_group_whatever_their_names() -> None:
    # ZZ_SELECTOR selects AA_SELECTED: alone, AA_SELECTED moves one option, the selector two
    def selecting(options: dict[str, str]) -> dict[str, str]:
        out = dict(options)
        if out.get("CONFIG_ZZ_SELECTOR") == "y":
            out["CONFIG_AA_SELECTED"] = "y"
        return out

    bad = {"CONFIG_ZZ_SELECTOR": "y", "CONFIG_AA_SELECTED": "y"}
    (group,) = groups({}, bad, selecting)
    assert group.lead == "CONFIG_ZZ_SELECTOR" and group.options == bad


def test_an_option_kconfig_never_sets_is_left_out() -> None:
    bad = {**parse(GOOD), "CONFIG_LOCKDEP": "y"}  # no DEBUG_KERNEL: it can never be set
    assert groups(parse(GOOD), bad, settle) == []


@pytest.mark.parametrize("same", [GOOD, GOOD.replace("CONFIG_HZ=250\n", "CONFIG_HZ=250\n\n")])
def test_two_configs_alike_have_no_group(same: str) -> None:
    assert groups(parse(GOOD), parse(same), settle) == []
