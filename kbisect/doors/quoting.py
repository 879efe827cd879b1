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
# A line that opens a CommonMark fenced code block: three backticks or more (and none in
# the info string after them), or three tildes or more. Taken in the first column only: a
# fence indented in a list item ends with the item, which may be before its closing line.
_FENCE = re.compile(r"(`{3,})[^`]*|(~{3,}).*")


def inert(text: str, command: str, markdown: bool = False) -> str:
    """text with no mention, and each line whose first non-blank characters are `command`
    (GitLab's "/", a chat prefix) in a code span, as GitLab itself quotes quick actions.
    `markdown`: text is CommonMark of kbisect's (no raw HTML: others' words in it escaped),
    whose fenced code blocks are shown as they are: a mention there notifies no one, so it
    is left as it is; a line there starting with `command` gets a leading space (GitLab's
    quick actions start a line; one of its releases skipped only exact ``` fences)."""
    out: list[str] = []
    fence = ""  # the open fence's run of backticks or tildes; "" outside one
    for line in text.splitlines():
        if fence:
            if _closes(line, fence):
                fence = ""
            elif line.startswith(command):
                line = " " + line
            out.append(line)
            continue
        if markdown and (opens := _FENCE.fullmatch(line)):
            fence = opens[1] or opens[2]
        line = _MENTION.sub("@" + WORD_JOINER, line)
        out.append(code_span(line) if line.lstrip().startswith(command) else line)
    return "\n".join(out)


def _closes(line: str, fence: str) -> bool:
    """Whether line closes the fence: up to three spaces, then a run of its character at
    least as long, then only blanks (CommonMark)."""
    return re.fullmatch(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*", line) is not None


def code_span(text: str) -> str:
    """text as one CommonMark code span, shown as it is (CommonMark strips the one space
    padding each side)."""
    fence = backtick_fence(text)
    return f"{fence} {text} {fence}"
