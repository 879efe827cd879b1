"""The differential flame graph: the culprit's shape, coloured by change in share since the
parent, readable as XML, and what vanished listed under it."""

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from kbisect.reports.flame_diff import PAD, flame_diff_svg, write_flame_diff

NS = "{http://www.w3.org/2000/svg}"
MINUS = "\u2212"

# Different totals on purpose: shares, not samples, are compared. hot 10% -> 40%,
# cold 70% -> 40%, steady 20% -> 20% (five times the samples, the same share).
PARENT = Counter({"app;main;hot": 20, "app;main;cold": 140, "app;main;steady": 40})
CULPRIT = Counter({"app;main;hot": 400, "app;main;cold": 400, "app;main;steady": 200})


def frames(svg: str) -> dict[str, tuple[str, float, str]]:
    """By function name: (fill, width, tooltip) of its frame."""
    out = {}
    for g in ET.fromstring(svg).iter(f"{NS}g"):
        if g.get("class") != "frame":
            continue
        tip = g.findtext(f"{NS}title") or ""
        rect = g.find(f"{NS}rect")
        assert rect is not None
        out[tip.split("\n")[0]] = (rect.get("fill", ""), float(rect.get("width", "0")), tip)
    return out


def gone_lines(svg: str) -> list[str]:
    block = next(g for g in ET.fromstring(svg).iter(f"{NS}g") if g.get("class") == "gone")
    return [t.text or "" for t in block.iter(f"{NS}text")]


def rgb(fill: str) -> tuple[int, int, int]:
    assert fill.startswith("#") and len(fill) == 7, fill
    return int(fill[1:3], 16), int(fill[3:5], 16), int(fill[5:7], 16)


def test_the_svg_parses_and_stands_alone() -> None:
    svg = flame_diff_svg(PARENT, CULPRIT, "fio read: parent vs culprit")
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    assert "fio read: parent vs culprit" in [t.text for t in root.iter(f"{NS}text")]
    assert "<script" not in svg and "href" not in svg and "@import" not in svg
    assert svg.count("http") == 1  # the SVG namespace's name only, nothing fetched


def test_a_frame_that_grew_is_red_and_says_by_how_many_points() -> None:
    fill, _, tip = frames(flame_diff_svg(PARENT, CULPRIT, "t"))["hot"]
    r, g, b = rgb(fill)
    assert r > g + 100 and r > b + 100
    assert "culprit: 400 samples, 40.0%" in tip
    assert "parent: 10.0%" in tip
    assert "change: +30.0 points" in tip


def test_a_frame_that_shrank_is_blue() -> None:
    fill, _, tip = frames(flame_diff_svg(PARENT, CULPRIT, "t"))["cold"]
    r, g, b = rgb(fill)
    assert b > r + 100 and b > g + 50
    assert f"change: {MINUS}30.0 points" in tip


def test_a_frame_whose_share_held_is_neutral_though_its_samples_grew() -> None:
    drawn = frames(flame_diff_svg(PARENT, CULPRIT, "t"))
    for name in ("steady", "main", "all"):
        r, g, b = rgb(drawn[name][0])
        assert r == g == b, name
        assert "change: +0.0 points" in drawn[name][2]


def test_a_small_change_is_paler_than_a_large_one() -> None:
    parent = Counter({"a;x": 90, "a;y": 10})
    culprit = Counter({"a;x": 89, "a;y": 11})  # y: +1 point
    r, _, b = rgb(frames(flame_diff_svg(parent, culprit, "t"))["y"][0])
    assert r > b and b > 150  # red-ish, far from full


def test_widths_follow_the_culprits_samples() -> None:
    culprit = Counter({"app;a": 200, "app;b": 100})
    drawn = frames(flame_diff_svg(Counter({"app;a": 1, "app;b": 999}), culprit, "t", 1200))
    wa, wb = drawn["a"][1], drawn["b"][1]
    assert wa == pytest.approx(2 * wb, abs=0.02)
    assert wa + wb == pytest.approx(1200 - 2 * PAD, abs=0.02)


def test_children_sit_left_to_right_by_name_whatever_the_input_order() -> None:
    one = flame_diff_svg(Counter(), Counter({"app;zeta": 5, "app;alpha": 5}), "t")
    two = flame_diff_svg(Counter(), Counter({"app;alpha": 5, "app;zeta": 5}), "t")
    assert one == two
    xs = {
        (g.findtext(f"{NS}title") or "").split("\n")[0]: float(r.get("x", "0"))
        for g in ET.fromstring(one).iter(f"{NS}g")
        if (r := g.find(f"{NS}rect")) is not None
    }
    assert xs["alpha"] < xs["zeta"]


def test_a_symbol_with_xml_specials_round_trips() -> None:
    name = 'std::map<int, T&>::operator"<<"\'s & co'
    svg = flame_diff_svg(Counter({f"app;{name}": 3}), Counter({f"app;{name}": 3}), "<&>")
    assert name in frames(svg)
    labels = [t.text for t in ET.fromstring(svg).iter(f"{NS}text")]
    assert "<&>" in labels


def test_a_long_name_is_cut_to_fit_its_frame() -> None:
    long = "a_very_long_kernel_function_name_" * 4
    culprit = Counter({f"app;{long}": 1, "app;other": 9})  # 10% of 1180 px: 16 chars
    svg = flame_diff_svg(Counter(), culprit, "t")
    labels = [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}text")]
    cut = [s for s in labels if s.startswith("a_very") and s.endswith("..")]
    assert len(cut) == 1 and len(cut[0]) < len(long)
    assert long in frames(svg)  # the tooltip keeps the whole name


def test_a_function_only_the_parent_ran_is_listed_as_gone() -> None:
    parent = Counter({"app;main;work": 50, "app;main;legacy_path;helper": 50})
    culprit = Counter({"app;main;work": 80})
    svg = flame_diff_svg(parent, culprit, "t")
    assert "legacy_path" not in frames(svg)
    lines = gone_lines(svg)
    # Listed where it vanished, once: its callee's loss is part of its own.
    assert f"gone: legacy_path ({MINUS}50.0 points)" in lines
    assert not any("helper" in line for line in lines)


def test_the_gone_list_is_short_and_largest_first() -> None:
    parent = Counter({f"app;old{i}": 10 + i for i in range(9)} | {"app;kept": 100})
    svg = flame_diff_svg(parent, Counter({"app;kept": 10}), "t")
    names = [line.split()[1] for line in gone_lines(svg)[1:]]
    assert names == ["old8", "old7", "old6", "old5", "old4"]


def test_frames_too_narrow_to_see_are_dropped() -> None:
    culprit = Counter({"app;main": 9979, "app;small": 20, "app;tiny": 1})  # 0.2%, 0.01%
    drawn = frames(flame_diff_svg(Counter({"app;main": 10}), culprit, "t"))
    assert "small" in drawn
    assert "tiny" not in drawn


def test_a_frame_that_shrank_too_small_to_draw_is_listed() -> None:
    parent = Counter({"app;main": 50, "app;poll": 50})
    culprit = Counter({"app;main": 9999, "app;poll": 1})
    assert f"shrunk: poll ({MINUS}50.0 points)" in gone_lines(flame_diff_svg(parent, culprit, "t"))


def test_no_samples_at_all_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        flame_diff_svg(Counter(), Counter(), "t")


def test_one_empty_side_still_draws() -> None:
    svg = flame_diff_svg(Counter({"app;f": 4}), Counter(), "t")
    assert frames(svg) == {}
    assert f"gone: app ({MINUS}100.0 points)" in gone_lines(svg)


def test_written_to_a_new_folder(tmp_path: Path) -> None:
    out = write_flame_diff(PARENT, CULPRIT, "t", tmp_path / "a" / "b" / "flame.svg")
    assert out == tmp_path / "a" / "b" / "flame.svg"
    assert ET.parse(out).getroot().tag == f"{NS}svg"
    with pytest.raises(ValueError):
        write_flame_diff(Counter(), Counter(), "t", tmp_path / "c" / "flame.svg")
    assert not (tmp_path / "c").exists()
