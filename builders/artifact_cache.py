"""Artifacts keyed by (tree hash, config hash): the same inputs are never built twice.

A compile failure is cached too (it is as deterministic as a success); an
infrastructure failure is not.
"""

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from kbisect import settings
from kbisect.errors import KernelBuildError
from kbisect.model import Artifact


def entry_dir(tree: str, config_hash: str) -> Path:
    return settings.cache_dir() / "artifacts" / f"{tree[:20]}-{config_hash[:20]}"


def lookup(tree: str, config_hash: str, commit: str) -> Artifact | None:
    """The cached artifact; raises the cached KernelBuildError for a known-broken tree."""
    meta_path = entry_dir(tree, config_hash) / "meta.json"
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    if meta["status"] == "failed":
        raise KernelBuildError(meta["error"], log_path=meta["build_log"])
    art = Artifact(**meta["artifact"])
    if not Path(art.kernel).exists():
        return None
    return Artifact(**{**asdict(art), "commit": commit, "cached": True, "seconds": 0.0})


def store(artifact_dir: Path, artifact: Artifact) -> None:
    _write_meta(artifact_dir, {"status": "ok", "artifact": asdict(artifact)})


def store_failure(artifact_dir: Path, error: KernelBuildError) -> None:
    _write_meta(
        artifact_dir, {"status": "failed", "error": str(error), "build_log": error.log_path}
    )


def _write_meta(artifact_dir: Path, meta: dict[str, object]) -> None:
    artifact_dir.mkdir(parents=True, exist_ok=True)
    tmp = artifact_dir / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, artifact_dir / "meta.json")  # atomic: a reader never sees half an entry


def keep(src: Path, artifact_dir: Path, name: str) -> str:
    artifact_dir.mkdir(parents=True, exist_ok=True)
    dst = artifact_dir / name
    shutil.copy2(src, dst)
    return str(dst)
