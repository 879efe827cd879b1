"""The Why lines: the comparison's listed changes in the words a kernel engineer pastes
into a bug ("nvme0n1 read request size: 512 -> 8 sectors (-98%, 95% CI ...)"). Pure."""

import re

from kbisect.explain.compare import SHARE_SOURCES, Change, Comparison

# iostat's short names (proc_stats.iostat) as words; r and w read alike
IOSTAT_WORDS = {
    "/s": "{io}s/s",
    "kB/s": "{io} kB/s",
    "rqm/s": "{io} merges/s",
    "areq-sz sectors": "{io} request size (sectors)",
    "_await ms": "{io} await (ms)",
    "rqm %": "{io}s merged (%)",
}
IO_PART = re.compile(r"\b(read|write) ")  # "nvme0n1 read requests": the part of "requests"
WHY_LINES = 8  # the report's Why section: the largest changes, the rest in --json
# ... of which the profile's largest changes, by points of the samples: a share's change in
# points does not rank against a count's factor (on a slowdown:25 lab the busy-wait's
# +11.6 points ranked 12th, under vmstat's page counts)
PROFILE_LINES = 3


def label(c: Change) -> str:
    """The statistic in words."""
    if c.source in SHARE_SOURCES:
        fn, _, kind = c.name.rpartition(" (")
        return f"self time in {fn}" if kind == "self)" else f"time in {fn} and its callees"
    if c.source == "diskstats":
        disk, _, short = c.name.partition(" ")
        for io, word in (("r", "read"), ("w", "write")):
            if short.startswith(io) and short[1:] in IOSTAT_WORDS:
                return f"{disk} {IOSTAT_WORDS[short[1:]].format(io=word)}"
        if short == "%util":
            return f"{disk} utilization (%)"
    return f"{c.source} {c.name}"


def number(x: float) -> str:
    """Counts with thousands' commas; other figures to three significant digits."""
    if abs(x) >= 1000 or float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:.3g}"


def line(c: Change) -> str:
    if c.source in SHARE_SOURCES:
        assert c.change is not None and c.low is not None and c.high is not None
        return (
            f"{label(c)}: {c.parent:.1f}% -> {c.culprit:.1f}% of samples "
            f"({c.change:+.1f} points, 95% CI {c.low:+.1f} to {c.high:+.1f})"
        )
    head = f"{label(c)}: {number(c.parent)} -> {number(c.culprit)}"
    if c.change is None or c.low is None or c.high is None:
        return f"{head} (from none)"
    return f"{head} ({c.change:+.0f}%, 95% CI {c.low:+.0f}% to {c.high:+.0f}%)"


def why_lines(comparison: Comparison, top: int = WHY_LINES) -> list[str]:
    """The largest listed changes (compare.size), one a line (up to PROFILE_LINES of them
    the profile's, last), then how many statistics were tested."""
    shares = [c for c in comparison.changes if c.source in SHARE_SOURCES]
    # a total that reads as one of its parts (blktrace's requests as its read requests,
    # when nothing was written) says nothing more: the part's line only (a read and a
    # write line that happen to agree are both kept)
    parts = {
        (c.source, IO_PART.sub("", c.name), c.parent, c.culprit)
        for c in comparison.changes
        if IO_PART.search(c.name)
    }
    others = [
        c
        for c in comparison.changes
        if c.source not in SHARE_SOURCES and (c.source, c.name, c.parent, c.culprit) not in parts
    ]
    n = min(PROFILE_LINES, len(shares), top)
    picked = others[: top - n] + shares[:n]
    lines = [line(c) for c in picked]
    more = comparison.listed - len(picked)
    if more > 0:
        kept = len(comparison.changes)
        where = f"the {kept} largest in the job's JSON" if comparison.more else "in the job's JSON"
        lines.append(f"... and {more} more ({where})")
    lines.append(
        f"{comparison.listed} of {comparison.tested} statistics changed beyond their "
        f"noise ({comparison.read} read)"
    )
    return lines
