"""Code layout, LKP's commonest false culprit: a change that only moves other functions
about can make a timing faster or slower. Whether to suspect it (the culprit's diff
touches none of the functions the time goes to), and what rebuilding the pair with
aligned functions said. Pure."""

from collections.abc import Mapping

from kbisect.contract import EXPLAIN_ALIGNMENT, EXPLAIN_TOP_FUNCTIONS
from kbisect.explain.compare import Change
from kbisect.workflows.explain_types import AlignmentCheck, AlignmentWord


def base_name(symbol: str) -> str:
    """gcc's clones and parts read as their function: nvme_setup_cmd.isra.0, foo.cold."""
    return symbol.split(".", 1)[0]


def top_functions(stacks: Mapping[str, int], n: int = EXPLAIN_TOP_FUNCTIONS) -> list[str]:
    """The n functions the most samples are in (anywhere on the stack, once a sample);
    folded stacks start with the command, which is not a function."""
    anywhere: dict[str, int] = {}
    for stack, count in stacks.items():
        for fn in {base_name(f) for f in stack.split(";")[1:]}:
            anywhere[fn] = anywhere.get(fn, 0) + count
    return sorted(anywhere, key=lambda f: (-anywhere[f], f))[:n]


def suggestion(touched: list[str], stacks: Mapping[str, int], job: str) -> str:
    """The alignment check suggested when the diff touches none of the culprit's most
    sampled functions ("": it touches one, or its profile is empty)."""
    top = top_functions(stacks)
    if not top or {base_name(f) for f in touched} & set(top):
        return ""
    again = f"kbisect explain {job} --alignment" if job else "--alignment"
    return (
        f"the culprit's diff touches none of its {len(top)} most sampled functions: a "
        f"code-layout effect? ({again}: the pair rebuilt with {EXPLAIN_ALIGNMENT}-byte "
        "aligned functions and measured again)"
    )


def alignment_check(aligned: Change, effect: Change, boots: int) -> AlignmentCheck:
    """The metric's change on the aligned pair against the effect the explain kernels
    showed: it remains when its interval leaves out no change on the same side; it
    vanishes when the interval holds no change and leaves the effect out; else the boots
    cannot tell (too few of them, or the aligned pair changes the other way)."""
    low, high, change = aligned.low, aligned.high, aligned.change
    how = f"with {EXPLAIN_ALIGNMENT}-byte aligned functions (built -O2), {boots} boots a side"
    if change is None or low is None or high is None:
        line = f"cannot tell: the parent's aligned kernel reads 0 {how}"
        return AlignmentCheck(AlignmentWord.CANNOT_TELL, aligned.to_json(), boots, line)
    said = f"{change:+.1f}% (95% CI {low:+.1f}% to {high:+.1f}%) {how}"
    was = effect.change
    if not low <= 0 <= high and (was is None or (change < 0) == (was < 0)):
        verdict, line = AlignmentWord.REMAINS, f"remains: {said}"
    elif low <= 0 <= high and was is not None and not low <= was <= high:
        verdict = AlignmentWord.VANISHES
        line = (
            f"vanishes: {said}, against {was:+.1f}%: likely a code-layout artifact, not the change"
        )
    else:
        verdict = AlignmentWord.CANNOT_TELL
        why = "it changes the other way" if not low <= 0 <= high else "more --boots"
        line = f"cannot tell: {said} ({why})"
    return AlignmentCheck(verdict, aligned.to_json(), boots, line)
