"""A pass/fail job's signature: a regular expression matched with RE2.

Python's `re` backtracks: a pattern such as `(\\w+\\s?)+:$` takes seconds on a 50-character
line and hours on a longer one, holding the interpreter lock all the while, so a worker
process (every build, boot and heartbeat of every job it serves) would stop with it.
RE2 matches in time linear in the line and refuses what it cannot match that way
(backreferences, lookaround), so a signature is refused at submit, never while a job runs.
"""

from typing import Protocol

import re2

MAX_SIGNATURE = 200  # characters of a signature
# RE2's memory for one compiled signature (its default is 8 MiB): ample for 200 characters
MAX_PROGRAM_BYTES = 1 << 20
SYNTAX = "RE2 syntax: no backreferences, lookahead or lookbehind"


class Pattern(Protocol):
    def search(self, text: str) -> object: ...


class SignatureError(ValueError):
    """The text is not a signature RE2 takes; the message says why."""


def compile_signature(text: str) -> Pattern:
    """The compiled signature; SignatureError when it is too long or not RE2's syntax."""
    if len(text) > MAX_SIGNATURE:
        raise SignatureError(f"is over {MAX_SIGNATURE} characters")
    options = re2.Options()
    options.max_mem = MAX_PROGRAM_BYTES
    options.log_errors = False  # RE2 would print to stderr; the error is raised instead
    try:
        pattern: Pattern = re2.compile(text, options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode(errors="replace") if isinstance(why, bytes) else why  # RE2's bytes
        raise SignatureError(f"is not a regular expression in {SYNTAX} ({why})") from exc
    return pattern
