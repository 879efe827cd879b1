"""A boot's CPU profile: `perf script -F comm,ip,sym` samples folded into stacks, and each
function's share of the samples. Pure.

A sample is a header line (the task's command) and its call chain, the leaf first, one
frame a line; a blank line ends it. Folded stacks are the flame graph's input
("comm;outer;...;leaf count"). A function's self share is the samples it is the leaf of;
its total share, those it is anywhere in (once a sample, however deep it recurses).
"""

from collections import Counter

from kbisect.model import Stats

UNKNOWN = "[unknown]"  # a frame perf found no symbol for (a stripped user binary)


def fold(script: str) -> Counter[str]:
    """Each distinct stack ("comm;outer;...;leaf") and its samples."""
    stacks: Counter[str] = Counter()
    comm, frames = "", list[str]()

    def close() -> None:
        if comm:
            stacks[";".join([comm, *reversed(frames)])] += 1

    for line in script.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():  # a sample's header: its command
            close()
            comm, frames = line.split()[0] if line.split() else "?", []
            continue
        parts = line.split(maxsplit=1)
        sym = parts[1].strip() if len(parts) > 1 else UNKNOWN
        if sym != UNKNOWN or not frames or frames[-1] != UNKNOWN:
            frames.append(sym)  # runs of unknown frames read as one
    close()
    return stacks


def shares(stacks: Counter[str]) -> Stats:
    """By function, its self and total share of the samples, in percent; the command
    itself (the stack's root) is not a function."""
    total = sum(stacks.values())
    if not total:
        return {}
    self_: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    for stack, count in stacks.items():
        frames = stack.split(";")[1:]
        if not frames:
            continue
        self_[frames[-1]] += count
        for fn in set(frames):
            anywhere[fn] += count
    out: Stats = {}
    for fn, count in anywhere.items():
        if fn == UNKNOWN:
            continue
        out[("profile", f"{fn} (total)")] = 100 * count / total
        if self_[fn]:
            out[("profile", f"{fn} (self)")] = 100 * self_[fn] / total
    return out


def read_folded(text: str) -> Counter[str]:
    """folded_text() read back."""
    stacks: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


def folded_text(stacks: Counter[str]) -> str:
    """The stacks as the flame graph tools read them, the most sampled first."""
    return "".join(f"{s} {n}\n" for s, n in stacks.most_common())
