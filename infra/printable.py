"""Text from outside (a guest kernel's words, a repository's subjects) as one printable
line: what kbisect posts and prints must not carry control characters, line breaks that
start a command of their own ("/close"), or megabytes that bury the rest."""


def one_line(text: object, cap: int) -> str:
    """text as one printable line of at most `cap` characters (cut with an ellipsis)."""
    s = text if isinstance(text, str) else str(text)
    if not s.isprintable():  # control and format characters, line and other separators
        s = "".join(c if c.isprintable() else " " for c in s)
    s = " ".join(s.split())
    return s if len(s) <= cap else s[: cap - 1] + "\u2026"
