"""Kernels shared between hosts with no shared folder (KBISECT_STORE).

A build host puts each artifact cache entry into an object store under the entry's own
name (its tree and config hashes: a content key): every file, then a listing of them
(with the symlinks a modules folder holds), then meta.json last, so an entry with a
meta.json is whole. A VM host that lacks the kernel a boot needs fetches the entry into
its own cache, under a temporary name renamed into place, and artifact_cache.lookup
checks every file's sha256 against meta.json before the boot, as it does for an entry
built on the host. The store is file://, http(s):// (WebDAV: PUT and GET) or s3://
(credentials from the AWS_* variables), through obstore.
"""

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import NotFoundError
from obstore.store import ObjectStore, from_url

from kbisect import settings
from kbisect.builders import artifact_cache
from kbisect.errors import InfraError
from kbisect.model import Artifact

if TYPE_CHECKING:
    from obstore.store import ClientConfig  # a TypedDict of the stubs only

log = logging.getLogger(__name__)
LISTING = "store-files.json"  # the entry's files and symlinks, uploaded before meta.json
META = "meta.json"


class ArtifactStore:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        try:
            if url.startswith("file://"):
                Path(url.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
            # plain http is for a store on a trusted network (the tests' WebDAV on
            # 127.0.0.1); every file is checked by its sha256 on the VM host anyway
            options: ClientConfig | None = (
                {"allow_http": True} if url.startswith("http://") else None
            )
            self._store: ObjectStore = from_url(self.url, client_options=options)
        except (OSError, ValueError, obstore.exceptions.BaseError) as exc:
            raise InfraError(f"KBISECT_STORE={url}: cannot open it ({exc})") from exc

    # --- a build host ------------------------------------------------------------------
    def publish(self, art: Artifact) -> bool:
        """Put the artifact's cache entry into the store, unless it is there already;
        whether it was put now."""
        adir = artifact_cache.entry_dir(art.tree, art.config_hash)
        meta = (adir / META).read_bytes()
        name = adir.name
        if self._get(f"{name}/{META}") == meta:
            return False
        files, links = _walk(adir)
        for rel in files:
            if rel != META:
                self._put(f"{name}/{rel}", adir / rel)
        listing = {"files": [r for r in files if r != META], "links": links}
        self._put(f"{name}/{LISTING}", json.dumps(listing).encode())
        self._put(f"{name}/{META}", meta)  # last: the entry is whole from here on
        log.info("store: put %s (%d files)", name, len(files))
        return True

    # --- a VM host ---------------------------------------------------------------------
    def fetch(self, art: Artifact) -> Artifact | None:
        """The artifact in this host's cache, fetched from the store if missing; None when
        the store has no such entry. Its files are checked (sha256) by the lookup."""
        local = artifact_cache.lookup(art.tree, art.config_hash, art.commit)
        if local is not None:
            return local
        adir = artifact_cache.entry_dir(art.tree, art.config_hash)
        name = adir.name
        meta = self._get(f"{name}/{META}")
        raw_listing = self._get(f"{name}/{LISTING}")
        if meta is None or raw_listing is None:
            return None
        files, links = _listing(raw_listing, name)
        adir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".fetch-{name}-", dir=adir.parent))
        try:
            for rel in files:  # every file first: no write can pass through a symlink
                data = self._get(f"{name}/{rel}")
                if data is None:
                    raise InfraError(f"store: {name}/{rel} is listed but missing: rebuild it")
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            for rel, to in links.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                os.symlink(to, tmp / rel)
            (tmp / META).write_bytes(meta)
            self._place(tmp, art)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        fetched = artifact_cache.lookup(art.tree, art.config_hash, art.commit)
        if fetched is None:
            raise InfraError(f"store: {name} does not match its sha256s: rebuild it")
        log.info("kernel %s fetched from the store, sha256 checked (%s)", art.commit[:12], name)
        return fetched

    @staticmethod
    def _place(tmp: Path, art: Artifact) -> None:
        """The fetched entry into place, unless another worker of this host put a whole one
        there meanwhile (it may be booting from it); a torn or damaged one is replaced."""
        adir = artifact_cache.entry_dir(art.tree, art.config_hash)
        if artifact_cache.lookup(art.tree, art.config_hash, art.commit) is not None:
            return
        if adir.exists():
            shutil.rmtree(adir, ignore_errors=True)
        try:
            tmp.rename(adir)
        except OSError:  # another fetch renamed its copy first: that one stands
            if artifact_cache.lookup(art.tree, art.config_hash, art.commit) is None:
                raise

    # --- the object store ----------------------------------------------------------------
    def _get(self, path: str) -> bytes | None:
        try:
            return bytes(obstore.get(self._store, path).bytes())
        except (NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:  # obstore's errors have no one base across its versions
            raise InfraError(f"store {self.url}: cannot read {path}: {exc}") from exc

    def _put(self, path: str, data: bytes | Path) -> None:
        try:
            obstore.put(self._store, path, data)
        except Exception as exc:
            raise InfraError(f"store {self.url}: cannot write {path}: {exc}") from exc


def _walk(adir: Path) -> tuple[list[str], dict[str, str]]:
    """The entry's files and its symlinks (relative path: target), symlinks not followed."""
    files, links = [], {}
    for dirpath, dirnames, filenames in os.walk(adir):
        for name in [*dirnames, *filenames]:
            full = Path(dirpath, name)
            rel = str(full.relative_to(adir))
            if full.is_symlink():
                links[rel] = os.readlink(full)
            elif full.is_file():
                files.append(rel)
    return sorted(files), links


def _listing(raw: bytes, name: str) -> tuple[list[str], dict[str, str]]:
    """The store's listing, read, not trusted: every path stays inside the entry."""
    try:
        data: Any = json.loads(raw)
        files, links = data["files"], data["links"]
        ok = isinstance(files, list) and isinstance(links, dict)
        ok = ok and all(artifact_cache.inside(r) and r != META for r in [*files, *links])
        ok = ok and all(isinstance(t, str) for t in links.values())
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise InfraError(f"store: {name}/{LISTING} is torn or foreign: rebuild the kernel")
    return files, links


def from_settings(s: "settings.Settings") -> ArtifactStore | None:
    return ArtifactStore(s.store) if s.store else None
