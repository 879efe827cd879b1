"""Where kbisect keeps its caches and finds its inputs. Overridable by environment."""

import os
from pathlib import Path

import platformdirs

KERNEL_SOURCE_TARBALL = Path(
    os.environ.get("KBISECT_KERNEL_SOURCE", "/usr/src/linux-source-6.1.tar.xz")
)


def cache_dir() -> Path:
    """Root of build dirs, worktrees, artifacts and guest images."""
    root = os.environ.get("KBISECT_CACHE") or platformdirs.user_cache_dir("kbisect")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """Persistent state (the Temporal dev server database)."""
    root = os.environ.get("KBISECT_DATA") or platformdirs.user_data_dir("kbisect")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_jobs() -> int:
    return int(os.environ.get("KBISECT_JOBS", str((os.cpu_count() or 1) + 1)))
