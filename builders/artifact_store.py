"""Kernels shared between hosts with no shared folder (KBISECT_STORE).

A build host puts each artifact cache entry into an object store under the entry's own
name (its tree and config hashes: a content key): every file, then a listing of them
with each one's size and sha256, then meta.json last, so an entry with a meta.json is
whole. With a key the hosts share (KBISECT_STORE_KEY_FILE) the listing is signed (an
HMAC over it and meta.json's sha256).

A VM host that lacks the kernel a boot needs fetches the entry: each file streamed to a
temporary folder of its cache, hashed as it comes, capped at its listed size; then the
whole entry is checked as artifact_cache.lookup checks one (every sha256 in meta.json),
its image against the sha256 the job's history carries (which no writer to the store can
rewrite), and only then renamed into place. An entry holds regular files only: a listed
symlink is refused. Anything wrong is an InfraError (a host fault, never a verdict) and
leaves nothing in the cache.

The store is file://, http(s):// (WebDAV: PUT and GET) or s3:// (credentials from the
AWS_* variables), through obstore, with a timeout on each request.
"""

import hashlib
import hmac
import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import NotFoundError
from obstore.store import ObjectStore, from_url

from kbisect import settings
from kbisect.builders import artifact_cache
from kbisect.contract import (
    STORE_CONNECT_SECONDS,
    STORE_ENTRY_MAX_BYTES,
    STORE_FILE_MAX_BYTES,
    STORE_KEY_MIN_BYTES,
    STORE_LISTING_MAX_BYTES,
    STORE_REQUEST_SECONDS,
    STORE_RETRIES,
    STORE_STALL_SECONDS,
)
from kbisect.errors import InfraError, UserError
from kbisect.model import Artifact
from kbisect.settings import redact

if TYPE_CHECKING:
    from obstore.store import ClientConfig  # a TypedDict of the stubs only

log = logging.getLogger(__name__)
LISTING = "store-files.json"  # the entry's files, sizes and sha256s, put before meta.json
LISTING_VERSION = 2  # 1: paths only, with symlinks (refused now: rebuilt and put again)
META = "meta.json"
CHUNK = 1 << 20  # bytes of a fetch held in memory at once


class ArtifactStore:
    def __init__(self, url: str, key: bytes = b"") -> None:
        self.url = url.rstrip("/")
        self.key = key  # signs listings (publish) and is required of them (fetch)
        try:
            if url.startswith("file://"):
                Path(url.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
                self._store: ObjectStore = from_url(self.url)
            else:
                self._store = from_url(
                    self.url, client_options=_client_options(url), retry_config=_RETRIES
                )
        except (OSError, ValueError, obstore.exceptions.BaseError) as exc:
            raise InfraError(redact(f"KBISECT_STORE={url}: cannot open it ({exc})")) from exc

    # --- a build host ------------------------------------------------------------------
    def publish(self, art: Artifact) -> bool:
        """Put the artifact's cache entry into the store, unless it is there already and
        listed as this kbisect lists (and signs) one; whether it was put now."""
        adir = artifact_cache.entry_dir(art.tree, art.config_hash)
        meta = (adir / META).read_bytes()
        name = adir.name
        files, links = _walk(adir)
        if links:  # an entry cached by an older kbisect: rebuild it without them
            artifact_cache.evict(adir)
            raise InfraError(
                f"cache entry {name} holds symlinks ({', '.join(sorted(links)[:3])}), which "
                "the store refuses: evicted, the kernel is rebuilt on the next try"
            )
        if self._get(f"{name}/{META}") == meta and self._current(name, meta):
            return False  # no file hashed again: a cached build's publish costs two GETs
        listed = {
            rel: {
                "size": (adir / rel).stat().st_size,
                "sha256": artifact_cache.file_sha256(adir / rel),
            }
            for rel in files
            if rel != META
        }
        listing = self._signed({"version": LISTING_VERSION, "files": listed}, meta)
        for rel in listed:
            self._put(f"{name}/{rel}", adir / rel)
        self._put(f"{name}/{LISTING}", listing)
        self._put(f"{name}/{META}", meta)  # last: the entry is whole from here on
        log.info("store: put %s (%d files)", name, len(listed))
        return True

    def _current(self, name: str, meta: bytes) -> bool:
        """Whether the store's listing of this meta.json is this kbisect's kind, and signed
        with our key when we have one (else the entry is put again)."""
        raw = self._get(f"{name}/{LISTING}", STORE_LISTING_MAX_BYTES)
        try:
            if raw is None or json.loads(raw).get("version") != LISTING_VERSION:
                return False
            self._listing(raw, meta, name)
        except (InfraError, ValueError, AttributeError):
            return False
        return True

    def _signed(self, listing: dict[str, Any], meta: bytes) -> bytes:
        """The listing as stored: with meta.json's sha256, and signed when there is a key."""
        body = {**listing, "meta_sha256": hashlib.sha256(meta).hexdigest()}
        if self.key:
            body["hmac"] = _mac(self.key, body)
        return json.dumps(body, sort_keys=True).encode()

    # --- a VM host ---------------------------------------------------------------------
    def fetch(
        self, art: Artifact, progress: Callable[[str], None] = lambda _: None
    ) -> Artifact | None:
        """The artifact in this host's cache, fetched from the store if missing; None when
        the store has no such entry. InfraError for an entry that is not the one built:
        its image is not the job's, a file is not as listed, or its listing is unsigned,
        foreign or torn. Nothing that fails a check is left in the cache."""
        local = artifact_cache.lookup(art.tree, art.config_hash, art.commit)
        if local is not None:
            return _the_jobs(local, art, artifact_cache.entry_dir(art.tree, art.config_hash))
        adir = artifact_cache.entry_dir(art.tree, art.config_hash)
        name = adir.name
        meta = self._get(f"{name}/{META}", artifact_cache.MAX_META_BYTES)
        raw_listing = self._get(f"{name}/{LISTING}", STORE_LISTING_MAX_BYTES)
        if meta is None or raw_listing is None:
            return None
        files = self._listing(raw_listing, meta, name)
        _the_jobs(_meta_image(meta, name), art, None)  # before a byte of it is fetched
        try:
            adir.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".fetch-{name}-", dir=adir.parent))
        except OSError as exc:
            raise InfraError(f"store: cannot fetch into {adir.parent} ({exc.strerror})") from exc
        try:
            for n, (rel, (size, sha)) in enumerate(sorted(files.items()), 1):
                progress(f"fetching {art.commit[:12]} from the store: file {n} of {len(files)}")
                self._download(f"{name}/{rel}", tmp / rel, size, sha)
            (tmp / META).write_bytes(meta)
            why = artifact_cache.check_entry(tmp, art.tree, art.config_hash)
            if why:
                raise InfraError(f"store: {name}: {why}: rebuild it")
            self._place(tmp, art)
        except OSError as exc:  # the disk, or paths a listing made clash: a host fault
            raise InfraError(f"store: cannot fetch {name} into {tmp} ({exc})") from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        placed = artifact_cache.lookup(art.tree, art.config_hash, art.commit)
        if placed is None:
            raise InfraError(f"store: {name} does not match its sha256s: rebuild it")
        log.info("kernel %s fetched from the store, sha256 checked (%s)", art.commit[:12], name)
        return _the_jobs(placed, art, adir)

    def _listing(
        self, raw: bytes, meta: bytes, name: str
    ) -> dict[str, tuple[int | None, str | None]]:
        """The store's listing, read, not trusted: signed with our key when we have one,
        of this meta.json, every path inside the entry (no path both a file and another's
        folder), every size within the caps. A listing of the first format (paths only,
        put by a kbisect before this one) is taken without a key and without symlinks: its
        files are checked by meta.json's sha256s and its image by the job's."""
        torn = InfraError(f"store: {name}/{LISTING} is torn or foreign: rebuild the kernel")
        try:
            data: Any = json.loads(raw)
            if not isinstance(data, dict):
                raise torn
            if "version" not in data and not self.key and data.get("links") == {}:
                first: dict[str, tuple[int | None, str | None]] = {
                    str(rel): (None, None) for rel in data["files"]
                }
                return _paths_inside(first, torn)
            if data.get("version") != LISTING_VERSION:
                raise torn
            files = data["files"]
            entries: dict[str, tuple[int | None, str | None]] = {
                rel: (f["size"], str(f["sha256"]))
                for rel, f in files.items()
                if isinstance(f["size"], int) and not isinstance(f["size"], bool)
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise torn from exc
        if len(entries) != len(files) or set(data) - {"version", "files", "meta_sha256", "hmac"}:
            raise torn
        if self.key:
            given = data.get("hmac")
            body = {k: v for k, v in data.items() if k != "hmac"}
            if not isinstance(given, str) or not hmac.compare_digest(given, _mac(self.key, body)):
                raise InfraError(
                    f"store: {name}/{LISTING} is not signed with this host's "
                    "KBISECT_STORE_KEY_FILE key: a foreign writer, or build hosts with "
                    "another key (give every host the same key file)"
                )
        if data.get("meta_sha256") != hashlib.sha256(meta).hexdigest():
            raise InfraError(f"store: {name}: meta.json is not the one listed: rebuild it")
        sizes = [size or 0 for size, _ in entries.values()]
        if any(not 0 <= s <= STORE_FILE_MAX_BYTES for s in sizes) or (
            sum(sizes) > STORE_ENTRY_MAX_BYTES
        ):
            raise InfraError(
                f"store: {name} lists a file over {STORE_FILE_MAX_BYTES >> 20} MiB or "
                f"{STORE_ENTRY_MAX_BYTES >> 20} MiB in all: refused"
            )
        return _paths_inside(entries, torn)

    def _download(self, path: str, dst: Path, size: int | None, sha256: str | None) -> None:
        """Stream one file to dst (a new regular file), hashing as it comes; InfraError
        when it is longer or shorter than listed, or not its sha256 (a first-format
        listing gives neither: the file is capped, and meta.json's sha256s check it)."""
        dst.parent.mkdir(parents=True, exist_ok=True)
        cap = STORE_FILE_MAX_BYTES if size is None else size
        h, got = hashlib.sha256(), 0
        try:
            self._regular(path)
            result = obstore.get(self._store, path)
            with open(dst, "xb") as out:
                for chunk in result.stream(min_chunk_size=CHUNK):
                    got += len(chunk)
                    if got > cap:
                        break
                    h.update(chunk)
                    out.write(chunk)
        except (NotFoundError, FileNotFoundError) as exc:
            raise InfraError(f"store: {path} is listed but missing: rebuild it") from exc
        except InfraError:
            raise
        except OSError as exc:
            raise InfraError(f"store: cannot write {dst} ({exc.strerror})") from exc
        except Exception as exc:  # obstore's errors have no one base across its versions
            raise self._failed("read", path, exc) from exc
        if got > cap or (size is not None and (got != size or h.hexdigest() != sha256)):
            raise InfraError(f"store: {path} is not the file listed (size or sha256): refused")

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
    @property
    def redacted(self) -> str:
        """The URL without its credentials (http://user:password@host/...)."""
        return redact(self.url)

    def _failed(self, verb: str, path: str, exc: Exception) -> InfraError:
        """A request's failure, with the URL's credentials (if obstore quotes them) hidden."""
        return InfraError(redact(f"store {self.url}: cannot {verb} {path}: {exc}"))

    def _get(self, path: str, limit: int = STORE_FILE_MAX_BYTES) -> bytes | None:
        """A small object whole (at most limit bytes), or None when there is none."""
        try:
            self._regular(path)
            result = obstore.get(self._store, path)
            if int(result.meta["size"]) > limit:
                raise InfraError(f"store: {path} is over {limit >> 10} KiB: refused")
            return bytes(result.bytes())
        except (NotFoundError, FileNotFoundError):
            return None
        except InfraError:
            raise
        except Exception as exc:  # obstore's errors have no one base across its versions
            raise self._failed("read", path, exc) from exc

    def _regular(self, path: str) -> None:
        """In a file:// store, the object is a regular file, not a link, a FIFO or a
        device (obstore would follow a link, and block for good opening a FIFO)."""
        if not self.url.startswith("file://"):
            return
        try:
            mode = os.lstat(Path(self.url.removeprefix("file://"), path)).st_mode
        except FileNotFoundError:
            return  # obstore says it is missing
        if not stat.S_ISREG(mode):
            raise InfraError(f"store {self.redacted}: {path} is not a regular file: refused")

    def _put(self, path: str, data: bytes | Path) -> None:
        try:
            # WebDAV has no multipart upload, which obstore uses for a file over 5 MiB
            obstore.put(self._store, path, data, use_multipart=not self.url.startswith("http"))
        except Exception as exc:
            raise self._failed("write", path, exc) from exc


_RETRIES: Any = {
    "max_retries": STORE_RETRIES,
    "retry_timeout": timedelta(seconds=STORE_REQUEST_SECONDS),
    "backoff": {"init_backoff": timedelta(seconds=1), "max_backoff": timedelta(seconds=10)},
}


def _client_options(url: str) -> "ClientConfig":
    # plain http is for a store on a trusted network (the tests' WebDAV on 127.0.0.1);
    # every file is checked by its sha256 on the VM host anyway
    options: ClientConfig = {
        "connect_timeout": timedelta(seconds=STORE_CONNECT_SECONDS),
        "read_timeout": timedelta(seconds=STORE_STALL_SECONDS),
        "timeout": timedelta(seconds=STORE_REQUEST_SECONDS),
    }
    # obstore reads AWS_ALLOW_HTTP itself only when given no client options
    if url.startswith("http://") or os.environ.get("AWS_ALLOW_HTTP", "").lower() == "true":
        options["allow_http"] = True
    return options


def _the_jobs(found: Artifact, art: Artifact, adir: Path | None) -> Artifact:
    """found, if its image is the one the job's history names (a store entry's meta.json
    could name any image, with a sha256 to match); else InfraError, and the cached copy
    (adir) evicted."""
    if art.image_sha256 and found.image_sha256 != art.image_sha256:
        if adir is not None:
            artifact_cache.evict(adir)
        raise InfraError(
            f"the kernel of {art.commit[:12]} (here or in the store) is not the image its "
            "build made "
            f"(sha256 {found.image_sha256[:12]}, the job's {art.image_sha256[:12]}): "
            "refused; a writer to the store other than the build hosts?"
        )
    return found


def _meta_image(meta: bytes, name: str) -> Artifact:
    """The artifact meta.json names (checked whole later, by artifact_cache.check_entry)."""
    try:
        return Artifact(**{"modules": "", **json.loads(meta)["artifact"]})
    except (ValueError, KeyError, TypeError) as exc:
        raise InfraError(f"store: {name}/{META} is torn or foreign: rebuild the kernel") from exc


def _paths_inside(
    entries: dict[str, tuple[int | None, str | None]], torn: InfraError
) -> dict[str, tuple[int | None, str | None]]:
    """entries, if every path stays inside the entry, is not meta.json or under it, and
    no path is both a file and another one's folder; else torn."""
    folders = {str(p) for rel in entries for p in Path(rel).parents}
    for rel in entries:
        if not artifact_cache.inside(rel) or Path(rel).parts[0] == META or rel in folders:
            raise torn
    return entries


def _mac(key: bytes, body: dict[str, Any]) -> str:
    return hmac.new(key, json.dumps(body, sort_keys=True).encode(), "sha256").hexdigest()


def _walk(adir: Path) -> tuple[list[str], list[str]]:
    """The entry's regular files, and anything else in it (symlinks, FIFOs, devices), as
    paths relative to it; symlinks not followed. A writer's temporary names (a dot name at
    the top, or directly in the modules folder) are not the entry's; inside a kernel's
    modules every file is, as its sha256 in meta.json counts them all."""
    files, others = [], []
    for dirpath, dirnames, filenames in os.walk(adir):
        here = Path(dirpath).relative_to(adir)
        if here in (Path("."), Path(artifact_cache.MODULES)):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]  # not walked
            filenames = [f for f in filenames if not f.startswith(".")]
        for name in [*dirnames, *filenames]:
            full = Path(dirpath, name)
            rel = full.relative_to(adir)
            if full.is_symlink() or not (full.is_file() or full.is_dir()):
                others.append(str(rel))
            elif full.is_file():
                files.append(str(rel))
    return sorted(files), others


def from_settings(s: "settings.Settings") -> ArtifactStore | None:
    if not s.store:
        return None
    key = b""
    if s.store_key_file is not None:
        try:
            key = settings.read_small_file(s.store_key_file).strip()
        except OSError as exc:
            raise UserError(
                f"KBISECT_STORE_KEY_FILE={s.store_key_file}: cannot read it ({exc.strerror}): "
                "fix the path or unset it"
            ) from exc
        if len(key) < STORE_KEY_MIN_BYTES:
            raise UserError(
                f"KBISECT_STORE_KEY_FILE={s.store_key_file} holds under "
                f"{STORE_KEY_MIN_BYTES} bytes: make one "
                "with `openssl rand -hex 32 > FILE` and give every host the same file"
            )
    return ArtifactStore(s.store, key)
