"""Where the culprit spends its CPU time differently: a differential flame graph of two
boots' folded stacks (testcases/cpu_profile.py), the parent kernel's and the culprit's.

One standalone SVG, no script and nothing to fetch, so it opens offline from a job's files;
hovering a frame shows its figures. The shape is the culprit's profile, as in Brendan
Gregg's differential flame graphs, and each frame's colour says how its share of the
samples changed: shares, not samples, because the two boots took different numbers of
samples. What the parent spent time on and the culprit no longer does has no width in the
culprit's shape, so the largest of it is listed under the graph instead.

A frame is a path from the root ("comm;outer;...;fn"), as in any flame graph: the same
function under two callers is two frames.
"""

import html
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

FULL_COLOUR_POINTS = 5.0  # a change of this many points of share or more: full colour
# Frames with less of the culprit's samples are dropped: a kernel profile has many
# thousands of tiny frames, which would make the file huge and slow to open, unseen.
MIN_SHARE = 0.001
GONE_LINES = 5  # the largest losses only: the rest are in the folded stacks

NEUTRAL = (235, 235, 235)
GREW = (230, 60, 50)
SHRANK = (60, 110, 230)

MIN_WIDTH = 200
PAD = 10
TOP = 56  # the title and the legend
FRAME_H = 16
FONT = 12
CHAR_W = FONT * 0.6  # a monospace glyph's advance: labels are cut to fit by counting
MINUS = "\u2212"

# Characters XML 1.0 cannot hold at all, escaped or not (a stray byte in a symbol
# decoded with surrogateescape): one of them would make the whole file unreadable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass
class _Node:
    """A frame: the samples of each boot whose stacks pass through it."""

    name: str
    parent: int = 0
    culprit: int = 0
    children: dict[str, "_Node"] = field(default_factory=dict)


@dataclass(frozen=True)
class _Frame:
    node: _Node
    depth: int  # 0: the root, "all"
    x: float
    w: float


def flame_diff_svg(
    parent: Counter[str], culprit: Counter[str], title: str, width: int = 1200
) -> str:
    """The culprit's flame graph, red where a frame's share grew since the parent, blue
    where it shrank, and a list of what was lost that the graph cannot show."""
    root = _tree(parent, culprit)
    if not root.parent and not root.culprit:
        raise ValueError("flame diff: no samples in either profile (parent and culprit)")
    if width < MIN_WIDTH:
        raise ValueError(f"flame diff: width {width} is too narrow ({MIN_WIDTH} at least)")
    frames = _frames(root, width)
    gone = _gone(root)
    levels = max((f.depth for f in frames), default=-1) + 1
    graph_bottom = TOP + levels * FRAME_H
    height = graph_bottom + (FRAME_H + 2) * (len(gone) + 1 if gone else 0) + 2 * PAD
    legend = (
        f"width: culprit's {root.culprit:,} samples; colour: change in share since the "
        f"parent's {root.parent:,} samples, red grew, blue shrank, full at "
        f"\u00b1{FULL_COLOUR_POINTS:g} points"
    )
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{FONT}">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width / 2:.2f}" y="24" text-anchor="middle" font-size="17">'
        f"{_esc(title)}</text>",
        f'<text x="{width / 2:.2f}" y="44" text-anchor="middle" fill="#555555">'
        f"{_esc(legend)}</text>",
    ]
    out += (_frame_svg(f, root, graph_bottom) for f in frames)
    if gone:
        out.append(_gone_svg(gone, graph_bottom + PAD, width))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_flame_diff(parent: Counter[str], culprit: Counter[str], title: str, path: Path) -> Path:
    """flame_diff_svg() in a file (its folders made); the path."""
    svg = flame_diff_svg(parent, culprit, title)  # first: bad input leaves no folders
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(svg, encoding="utf-8")
    return path


def _tree(parent: Counter[str], culprit: Counter[str]) -> _Node:
    """Both boots' stacks merged into one tree under "all"."""
    root = _Node("all")
    for stack, n in parent.items():
        if n > 0:
            for node in _path(root, stack):
                node.parent += n
    for stack, n in culprit.items():
        if n > 0:
            for node in _path(root, stack):
                node.culprit += n
    return root


def _path(root: _Node, stack: str) -> list[_Node]:
    nodes = [root]
    for name in stack.split(";"):
        nodes.append(nodes[-1].children.setdefault(name, _Node(name)))
    return nodes


def _drawn(node: _Node, root: _Node) -> bool:
    return node.culprit > 0 and node.culprit >= MIN_SHARE * root.culprit


def _frames(root: _Node, width: int) -> list[_Frame]:
    """The frames wide enough to draw, children left to right by name; a frame's own
    samples (it was the leaf) leave the gap above it. A loop, not recursion: stacks can be
    deeper than Python's recursion limit."""
    if not root.culprit:
        return []
    scale = (width - 2 * PAD) / root.culprit
    out: list[_Frame] = []
    todo = [_Frame(root, 0, PAD, width - 2 * PAD)]
    while todo:
        f = todo.pop()
        out.append(f)
        x, kids = f.x, []
        for name in sorted(f.node.children):
            kid = f.node.children[name]
            if _drawn(kid, root):
                kids.append(_Frame(kid, f.depth + 1, x, kid.culprit * scale))
            x += kid.culprit * scale
        todo.extend(reversed(kids))
    return out


def _share(n: int, total: int) -> float:
    """Percent of a boot's samples; none of an empty boot's."""
    return 100 * n / total if total else 0.0


def _change(node: _Node, root: _Node) -> float:
    """Points of share gained since the parent (negative: lost)."""
    return _share(node.culprit, root.culprit) - _share(node.parent, root.parent)


def _gone(root: _Node) -> list[tuple[str, str, float]]:
    """The largest losses the graph cannot show, as (word, function, points): frames the
    culprit never reached ("gone") or reached too rarely to draw ("shrunk"), each counted
    where it stops being drawn (its callees' losses are part of it) and summed by function
    across callers."""
    lost: defaultdict[tuple[str, str], float] = defaultdict(float)
    todo = list(root.children.values())
    while todo:
        node = todo.pop()
        if _drawn(node, root):
            todo.extend(node.children.values())
        elif node.parent:
            lost["shrunk" if node.culprit else "gone", node.name] += _change(node, root)
    ranked = sorted((points, word, name) for (word, name), points in lost.items())
    return [(w, name, p) for p, w, name in ranked if round(p, 1) < 0][:GONE_LINES]


def _frame_svg(f: _Frame, root: _Node, bottom: int) -> str:
    """A frame: its box, its label if it fits, and its figures as the hover tooltip."""
    n = f.node
    change = _change(n, root)
    tip = (
        f"{n.name}\n"
        f"culprit: {n.culprit:,} samples, {_share(n.culprit, root.culprit):.1f}%\n"
        f"parent: {_share(n.parent, root.parent):.1f}%\n"
        f"change: {_points(change)} points"
    )
    y = bottom - (f.depth + 1) * FRAME_H
    label = _fit(n.name, f.w - 6)
    text = f'<text x="{f.x + 3:.2f}" y="{y + FRAME_H - 4}">{_esc(label)}</text>' if label else ""
    return (
        f'<g class="frame"><title>{_esc(tip)}</title>'
        f'<rect x="{f.x:.2f}" y="{y}" width="{f.w:.2f}" height="{FRAME_H - 1}" '
        f'fill="{_colour(change)}"/>{text}</g>'
    )


def _gone_svg(gone: list[tuple[str, str, float]], top: int, width: int) -> str:
    room = max(width - 2 * PAD - 24 * CHAR_W, 4 * CHAR_W)  # less the words and figures
    lines = ["lost from the parent's profile, too small or absent to draw:"] + [
        f"{word}: {_fit(name, room)} ({_points(p)} points)" for word, name, p in gone
    ]
    texts = "".join(
        f'<text x="{PAD}" y="{top + (i + 1) * (FRAME_H + 2)}">{_esc(line)}</text>'
        for i, line in enumerate(lines)
    )
    return f'<g class="gone">{texts}</g>'


def _colour(change: float) -> str:
    """Grey for no change, to full red (grew) or blue (shrank) at FULL_COLOUR_POINTS."""
    t = min(abs(change) / FULL_COLOUR_POINTS, 1.0)
    full = GREW if change > 0 else SHRANK
    r, g, b = (round(a + t * (z - a)) for a, z in zip(NEUTRAL, full, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def _points(change: float) -> str:
    """+1.5, or \u22121.5 with a true minus sign; never "-0.0"."""
    return f"{round(change, 1) + 0.0:+.1f}".replace("-", MINUS)


def _fit(name: str, room: float) -> str:
    """The name, cut with ".." to fit room pixels; nothing if not even three characters
    fit."""
    fit = int(room / CHAR_W)
    if fit < 3:
        return ""
    return name if len(name) <= fit else name[: fit - 2] + ".."


def _esc(text: str) -> str:
    """Text safe inside an element or attribute: C++ and kernel symbols carry <, >, &."""
    return html.escape(_NOT_XML.sub("?", text), quote=True)
