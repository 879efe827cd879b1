"""Small wording helpers shared by the command line and the reports."""


def plural(n: int, word: str) -> str:
    """'1 repetition', '3 repetitions'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def boots_a_side(old: int, new: int) -> str:
    """'1 boot a side', '12 and 13 boots' (old, new)."""
    return f"{plural(old, 'boot')} a side" if old == new else f"{old} and {new} boots"


def clip(text: str, width: int) -> str:
    """At most `width` characters; a cut one ends in an ellipsis, not mid-word."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    head = cut.rsplit(" ", 1)[0] if " " in cut else cut
    return head.rstrip(" ,;:") + "…"
