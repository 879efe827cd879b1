"""What differs between two kernel configs, in groups that move together (config bisection's
first step). No kernel tool dumps `select` and `depends on`, so a group is found the way
Kconfig itself settles it: the good config with one differing option set as the bad config
has it, settled by `make olddefconfig` (the `settle` callback), and whatever else that
changes joins the group. The groups in order make cumulative configs (good, good+g1,
good+g1+g2, ..., bad) that a bisection can walk as it walks commits.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

# `CONFIG_X=value` or `# CONFIG_X is not set`; anything else in a .config is a comment
SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")
NOT_SET = "n"  # an option unset, or absent: Kconfig reads both as n


@dataclass(frozen=True)
class Group:
    """Options that move together: `lead` set as the bad config has it made Kconfig set the
    others too (name -> value, NOT_SET for unset)."""

    lead: str
    options: dict[str, str]

    @property
    def words(self) -> str:
        """'CONFIG_X=y (with CONFIG_Y=y, CONFIG_Z is not set)': a bisection step's subject."""
        rest = [_word(k, v) for k, v in sorted(self.options.items()) if k != self.lead]
        lead = _word(self.lead, self.options[self.lead])
        return lead + (f" (with {', '.join(rest)})" if rest else "")


def _word(name: str, value: str) -> str:
    return f"{name} is not set" if value == NOT_SET else f"{name}={value}"


def parse(text: str) -> dict[str, str]:
    """A .config's options: name -> value (NOT_SET for `# ... is not set`)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if m := SET.match(line):
            found[m[1]] = m[2]
        elif m := UNSET.match(line):
            found[m[1]] = NOT_SET
    return found


def render(options: dict[str, str]) -> str:
    """Options as a .config's lines (for olddefconfig to settle), in name order."""
    return "".join(
        f"# {k} is not set\n" if v == NOT_SET else f"{k}={v}\n" for k, v in sorted(options.items())
    )


def differing(good: dict[str, str], bad: dict[str, str]) -> dict[str, str]:
    """The options whose value differs, as the bad config has them (absent: NOT_SET)."""
    names = sorted(set(good) | set(bad))
    return {n: bad.get(n, NOT_SET) for n in names if good.get(n, NOT_SET) != bad.get(n, NOT_SET)}


def groups(
    good: dict[str, str], bad: dict[str, str], settle: Callable[[dict[str, str]], dict[str, str]]
) -> list[Group]:
    """The differing options in groups, in order (those that move the most others alone
    first); each group taken on top of the ones before. `settle(options)` is the config
    Kconfig makes of them (olddefconfig). An option that Kconfig will not set as the bad
    config has it on top of what came before (its dependencies come later) is tried again
    after the others; one that never takes is left out of the groups (the caller reports
    it)."""
    current = dict(good)
    wanted = differing(good, bad)
    found: list[Group] = []
    pending = sorted(wanted, key=lambda name: (-_reach(good, name, wanted[name], settle), name))
    while pending:
        progressed, later = False, []
        for name in pending:
            if current.get(name, NOT_SET) == wanted[name]:
                continue  # an earlier group's Kconfig settling set it already
            settled = settle({**current, name: wanted[name]})
            if settled.get(name, NOT_SET) != wanted[name]:
                later.append(name)
                continue
            moved = differing(current, settled)
            found.append(Group(name, moved))
            current = settled
            progressed = True
        if not progressed:
            break
        pending = later
    return found


def _reach(
    good: dict[str, str], name: str, value: str, settle: Callable[[dict[str, str]], dict[str, str]]
) -> int:
    """How many options setting `name` alone on the good config moves (0: Kconfig does not
    take it there). Options that select others go first, so what they select joins their
    group rather than leading one of its own."""
    settled = settle({**good, name: value})
    return len(differing(good, settled)) if settled.get(name, NOT_SET) == value else 0


def cumulative(good: dict[str, str], found: list[Group]) -> list[dict[str, str]]:
    """good, good+g1, good+g1+g2, ...: the configs a bisection walks, oldest first."""
    configs = [dict(good)]
    for group in found:
        configs.append({**configs[-1], **group.options})
    return configs
