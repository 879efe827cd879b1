"""kbisect/settings.py is the one reader of KBISECT_* variables: every other module gets a
checked Settings (a second reader would skip the checks and the one-line errors)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kbisect", "workflows", "workers", "builders", "testcases", "infra")
READS = re.compile(r"""(environ(\.get)?\s*[\[(]|getenv\()\s*["']KBISECT_""")


def test_only_settings_reads_kbisect_variables() -> None:
    readers = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if not path.is_symlink() and READS.search(path.read_text())
    ]
    assert readers == ["kbisect/settings.py"]
