"""Small wording helpers shared by the command line and the reports."""


def plural(n: int, word: str) -> str:
    """'1 repetition', '3 repetitions'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def clip(text: str, width: int) -> str:
    """At most `width` characters; a cut one ends in an ellipsis, not mid-word."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    head = cut.rsplit(" ", 1)[0] if " " in cut else cut
    return head.rstrip(" ,;:") + "…"
