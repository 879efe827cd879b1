"""Small wording helpers shared by the command line and the reports."""


def plural(n: int, word: str) -> str:
    """'1 repetition', '3 repetitions'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
