"""README.md and docs/: every link stays in the repository and points at something there.

A relative link must name a file that exists (and, with an anchor, a heading of that
Markdown file, slugged as GitHub does); nothing may link outside the repository (a URL, an
absolute path, a `..` above its root) or mention the parent folder's `shared` files a
clone does not have; the README stays short. No URL is fetched.
"""

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 160
SHARED = "../" + "shared"  # spelled apart so that this file does not mention it itself

FENCE = re.compile(r"^\s{0,3}(```|~~~).*?^\s{0,3}\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)")
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]*:[^>\s]*)>")
BARE_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text a reader sees as prose: fenced and indented code blocks and code spans
    removed (a link-like string there is not a link)."""
    text = FENCE.sub("", text)
    kept: list[str] = []
    in_code = False
    for line in text.split("\n"):
        indented = line.startswith(("    ", "\t"))
        in_code = indented and (in_code or not kept or not kept[-1].strip())
        kept.append("" if in_code else line)
    return CODE_SPAN.sub("", "\n".join(kept))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than
    '-' and '_' removed, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, repeated ones numbered as GitHub does (x, x-1, x-2)."""
    text = FENCE.sub("", path.read_text())
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(text):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def targets(text: str) -> list[str]:
    seen = prose(text)
    return [*INLINE_LINK.findall(seen), *REFERENCE.findall(seen), *AUTOLINK.findall(seen)]


def link_problem(doc: Path, target: str, root: Path) -> str | None:
    """What is wrong with one link target of `doc`, or None."""
    if SHARED in target:
        return f"{target}: the parent folder's shared files are not in a clone"
    if SCHEME.match(target) or target.startswith("//"):
        return f"{target}: links outside the repository"
    if target.startswith("/"):
        return f"{target}: an absolute path; write it relative to {doc.name}"
    path_part, _, anchor = target.partition("#")
    dest = doc if not path_part else doc.parent / unquote(path_part)
    rel = os.path.normpath(os.path.relpath(dest, root))
    if rel == ".." or rel.startswith(".." + os.sep):
        return f"{target}: leaves the repository"
    if not (root / rel).exists():
        return f"{target}: no such file ({rel})"
    if anchor:
        if (root / rel).suffix != ".md":
            return f"{target}: an anchor into a file that is not Markdown"
        if anchor not in anchors(root / rel):
            return f"{target}: {rel} has no heading with anchor #{anchor}"
    return None


def problems(doc: Path, root: Path = ROOT) -> list[str]:
    """Every bad link in one Markdown file, and any mention of the shared folder."""
    text = doc.read_text()
    found = [p for t in targets(text) if (p := link_problem(doc, t, root)) is not None]
    found += [
        f"{url}: a bare URL links outside the repository" for url in BARE_URL.findall(prose(text))
    ]
    if SHARED in text:
        found.append(f"mentions {SHARED}, which a clone does not have")
    return found


# --- the repository's own documents ---------------------------------------------------
@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_points_into_the_repository(doc: Path) -> None:
    assert problems(doc) == []


def test_the_docs_are_there_and_linked_from_the_readme() -> None:
    docs = doc_files()[1:]
    assert len(docs) >= 10, docs
    linked = {
        (ROOT / t.partition("#")[0]).resolve() for t in targets((ROOT / "README.md").read_text())
    }
    assert [d.name for d in docs if d.resolve() not in linked] == []


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES


def test_no_tracked_file_mentions_the_shared_folder() -> None:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    offenders = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file() and not path.is_symlink() and SHARED.encode() in path.read_bytes():
            offenders.append(name)
    assert offenders == []


# --- the checker itself catches what it should -----------------------------------------
def _repo(tmp_path: Path, readme: str) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "usage.md").write_text("# Usage\n\n## The `try` command\n\ntext\n")
    (tmp_path / "code.py").write_text("")
    (tmp_path / "README.md").write_text(readme)
    return tmp_path / "README.md"


@pytest.mark.parametrize(
    ("link", "why"),
    [
        ("[x](docs/missing.md)", "no such file"),
        ("[x](docs/usage.md#no-such-heading)", "no heading"),
        ("[x](../elsewhere.md)", "leaves the repository"),
        ("[x](docs/../../elsewhere.md)", "leaves the repository"),
        ("[x](" + SHARED + "/seeds/story.md)", "shared files"),
        ("[x](https://example.org/page)", "outside the repository"),
        ("[x](/etc/passwd)", "absolute path"),
        ("[x](code.py#L3)", "not Markdown"),
        ("see https://example.org for more", "bare URL"),
        ("[x]: docs/gone.md", "no such file"),
    ],
)
def test_a_planted_bad_link_is_caught(tmp_path: Path, link: str, why: str) -> None:
    found = problems(_repo(tmp_path, f"# Title\n\n{link}\n"), tmp_path)
    assert len(found) >= 1 and why in found[0], found


def test_good_links_and_code_pass(tmp_path: Path) -> None:
    text = (
        "# Title\n\n[usage](docs/usage.md), [try](docs/usage.md#the-try-command), "
        "[code](code.py), [here](#title).\n\n"
        "    indented code: [x](nowhere.md) https://example.org\n\n"
        "`[x](nowhere.md)` and a span\nacross lines: `--homeserver\nhttps://example.org`\n"
    )
    assert problems(_repo(tmp_path, text), tmp_path) == []


def test_github_slugs() -> None:
    assert slug("Rounds with `--parallel`") == "rounds-with---parallel"
    assert slug("Your config: `--config FILE`") == "your-config---config-file"
    assert slug("Named trees, chat, GitLab and the SRU patch") == (
        "named-trees-chat-gitlab-and-the-sru-patch"
    )
