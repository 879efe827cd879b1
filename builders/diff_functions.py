"""The functions a commit's diff touches, for `kbisect explain`: does the culprit change
what the profile says the time went to, or only moves code about? Read from the C hunks'
headers (git names the function a hunk sits in) and from the function definitions the
diff adds or removes."""

import re
from pathlib import Path

from kbisect.infra.git import Git

# The hunk header names the function a hunk sits in by git's cpp driver, chosen for this
# command alone (never written into the user's tree): git's default takes the last line
# before the hunk that starts with a letter, and a C label (`out:`) is one.
C_FUNCTIONS = Path(__file__).with_name("c_functions.gitattributes")
_CALLED = re.compile(r"([A-Za-z_]\w*)\s*\(")
_HEADER = re.compile(r"^@@ [^@]* @@ ?(.*)$")
# a definition's first line, added or removed: no indent, a name and "(", no ";" after
_DEFINED = re.compile(r"^[+-](?![+-])(?:[A-Za-z_][\w \t\*]*?[\s\*])?([A-Za-z_]\w*)\s*\([^;]*$")
_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "defined"})


def functions_in(diff: str) -> list[str]:
    """The functions a unified diff (C files) touches, in the order met, once each."""
    found: dict[str, None] = {}
    for line in diff.splitlines():
        header = _HEADER.match(line)
        m = _CALLED.search(header.group(1)) if header else _DEFINED.match(line)
        if m and m.group(1) not in _KEYWORDS:
            found[m.group(1)] = None
    return list(found)


def changed_functions(git: Git, parent: str, culprit: str) -> list[str]:
    """The functions the C files change from parent to culprit."""
    diff = git.output("diff-tree", "-p", "-U0", "--no-color", parent, culprit, "--",
                      "*.c", "*.h", config=[f"core.attributesFile={C_FUNCTIONS}"])  # fmt: skip
    return functions_in(diff.decode(errors="replace"))
