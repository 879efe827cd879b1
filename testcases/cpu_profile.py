"""A boot's CPU profile: `perf script -F comm,ip,sym` samples folded into stacks, and each
function's share of the samples. Pure but for reading the script.

A sample is a header line (the task's command) and its call chain, the leaf first, one
frame a line; a blank line ends it. Folded stacks are the flame graph's input
("comm;outer;...;leaf count"). A function's self share is the samples it is the leaf of;
its total share, those it is anywhere in (once a sample, however deep it recurses).

The script is the kernel under test's: it is streamed, its first EXPLAIN_SCRIPT_BYTES
read, each name cut to EXPLAIN_NAME_CHARS, and only the most sampled stacks and functions
kept (EXPLAIN_STACKS, EXPLAIN_SOURCE_STATS); each cut is said in `said`.
"""

import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from kbisect.contract import (
    EXPLAIN_NAME_CHARS,
    EXPLAIN_SCRIPT_BYTES,
    EXPLAIN_SOURCE_STATS,
    EXPLAIN_STACKS,
    EXPLAIN_STACKS_CHARS,
)
from kbisect.infra.qemu import guest_text
from kbisect.model import LEFT_OUT, Stats, top_stacks

UNKNOWN = "[unknown]"  # a frame perf found no symbol for (a stripped user binary)
# A line read at most: a frame's address and its symbol, which is cut shorter anyway
LINE_BYTES = 64 + 4 * EXPLAIN_NAME_CHARS
# Distinct stacks held while folding: past twice this, the most sampled this many are kept
# (a script of unique stacks would hold every one of them)
HELD = 10 * EXPLAIN_STACKS
COUNT_DIGITS = 12  # a folded stack's count read at most (a day of 499 Hz on 1,000 CPUs: 11)


def _held(stacks: Counter[str]) -> Counter[str]:
    return Counter(dict(stacks.most_common(HELD))) if len(stacks) > 2 * HELD else stacks


def script_lines(path: Path, said: list[str], limit: int = EXPLAIN_SCRIPT_BYTES) -> Iterator[str]:
    """A script's (or folded stacks') lines, streamed: its first `limit` bytes, each line
    cut to LINE_BYTES; what was not read said in `said`."""
    read = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        while read < limit and (line := f.readline(LINE_BYTES)):
            read += len(line)
            rest = line
            while not rest.endswith(b"\n") and read < limit and (rest := f.readline(LINE_BYTES)):
                read += len(rest)  # the rest of a long line, skipped
            yield line.decode(errors="replace")
    if read < size:
        said.append(f"{path.name}: its first {_mib(read)} read, of {_mib(size)}")


def _mib(n: int) -> str:
    return f"{n >> 20:,} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def _name(text: str, cut: list[int]) -> str:
    """A guest's symbol or command as a stack holds it: guest_text of EXPLAIN_NAME_CHARS
    at most (counted in `cut` when cut), with no ";" (the frames' separator)."""
    if len(text) < EXPLAIN_NAME_CHARS and text.isprintable() and ";" not in text:
        if "  " not in text and text == text.strip():
            return text  # guest_text's own (the common case: a million frames a script)
    said = guest_text(text, EXPLAIN_NAME_CHARS)
    if len(said) == EXPLAIN_NAME_CHARS and said.endswith("\u2026"):
        cut[0] += 1
    return said.replace(";", ",")


def fold(lines: Iterable[str], said: list[str] | None = None) -> Counter[str]:
    """Each distinct stack ("comm;outer;...;leaf") and its samples: the EXPLAIN_STACKS
    most sampled, the others' samples under LEFT_OUT."""
    stacks: Counter[str] = Counter()
    comm, frames, total, cut = "", list[str](), 0, [0]

    def close() -> None:
        nonlocal stacks, total
        if comm:
            stacks[";".join([comm, *reversed(frames)])] += 1
            total += 1
            stacks = _held(stacks)

    for line in lines:
        if not line.strip():
            continue
        if not line[0].isspace():  # a sample's header: its command
            close()
            comm, frames = _name(line.split()[0], cut), []
            continue
        parts = line.split(maxsplit=1)
        sym = _name(parts[1].strip(), cut) if len(parts) > 1 else UNKNOWN
        if sym != UNKNOWN or not frames or frames[-1] != UNKNOWN:
            frames.append(sym)  # runs of unknown frames read as one
    close()
    kept = top_stacks(stacks, EXPLAIN_STACKS, EXPLAIN_STACKS_CHARS)
    left = total - sum(n for s, n in kept.items() if s != LEFT_OUT)
    kept.pop(LEFT_OUT, None)
    if left:
        kept[LEFT_OUT] = left
    said = [] if said is None else said
    if left:
        said.append(
            f"profile: {left:,} of {total:,} samples left out, in stacks past the "
            f"{EXPLAIN_STACKS:,} most sampled (or their {EXPLAIN_STACKS_CHARS:,} characters)"
        )
    if cut[0]:
        said.append(f"profile: {cut[0]:,} symbols cut to {EXPLAIN_NAME_CHARS} characters")
    return kept


def shares(stacks: Counter[str], said: list[str] | None = None) -> Stats:
    """By function, its self and total share of the samples, in percent; the command
    itself (the stack's root) is not a function. The most sampled functions' only, up to
    EXPLAIN_SOURCE_STATS shares."""
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
    ranked = [(fn, n) for fn, n in anywhere.most_common() if fn != UNKNOWN]
    for kept, (fn, count) in enumerate(ranked):
        if len(out) + (2 if self_[fn] else 1) > EXPLAIN_SOURCE_STATS:
            if said is not None:
                said.append(
                    f"profile: the shares of {len(ranked) - kept:,} functions past the "
                    f"{kept:,} most sampled left out"
                )
            break
        out[("profile", f"{fn} (total)")] = 100 * count / total
        if self_[fn]:
            out[("profile", f"{fn} (self)")] = 100 * self_[fn] / total
    return out


def read_folded(lines: Iterable[str]) -> Counter[str]:
    """folded_text() read back, as bounded as fold's (the folder is the guest's)."""
    stacks: Counter[str] = Counter()
    cut = [0]
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isascii() and count.isdigit() and len(count) <= COUNT_DIGITS:
            stacks[";".join(_name(f, cut) for f in stack.split(";"))] += int(count)
            stacks = _held(stacks)
    return top_stacks(stacks, EXPLAIN_STACKS, EXPLAIN_STACKS_CHARS)


def folded_text(stacks: Counter[str]) -> str:
    """The stacks as the flame graph tools read them, the most sampled first."""
    return "".join(f"{s} {n}\n" for s, n in stacks.most_common())
