"""What a door posts, made inert: no mention in it notifies anyone and no line of it reads
as a command, to GitLab (a quick action: `/close`), to a bot or to a door of ours. A post
carries others' words: a guest's (a failed boot's reason), a commit's subject, a name."""

import re

from kbisect.reports.lines import backtick_fence

# Invisible, and no name's character: "@\u2060all" names no one. GitLab takes a mention
# only where a name's character follows the @, whatever markdown is around it (a code span
# would not do in a table row, whose cells are split first, nor in an HTML block).
WORD_JOINER = "\u2060"
# An @ that may start a mention: GitLab's `@all`, `@user`, `@group/sub`, Matrix's `@room`,
# `@user:server`; one after a letter or a digit is an address's (kay@example.com).
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[^\s@])")


def inert(text: str, command: str) -> str:
    """text with no mention, and each line whose first non-blank characters are `command`
    (GitLab's "/", a chat prefix) in a code span, as GitLab itself quotes quick actions."""
    lines = _MENTION.sub("@" + WORD_JOINER, text).splitlines()
    return "\n".join(code_span(ln) if ln.lstrip().startswith(command) else ln for ln in lines)


def code_span(text: str) -> str:
    """text as one CommonMark code span, shown as it is (CommonMark strips the one space
    padding each side)."""
    fence = backtick_fence(text)
    return f"{fence} {text} {fence}"
