"""Peak memory of a VM host fetching a kernel whose entry holds one big file.

A build host's entry (a small image and config, and a build log of --mib MiB) is put
into a WebDAV store (nginx on 127.0.0.1) or a file:// one; a fresh process, as a VM
worker would, fetches it into a cache of its own and prints its peak resident memory
before and after the fetch. Run from the repository:

    python -m benchmarks.store_fetch_memory --mib 512 [--file-store]
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks import nginx

TREE, CFG = "b" * 40, "d" * 64
CHILD = """
import json, sys
from kbisect.builders.artifact_store import ArtifactStore
from kbisect.model import Artifact
def hwm():  # this process's peak resident memory (ru_maxrss would carry the parent's)
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1])
art = Artifact(**json.loads(sys.argv[2]))
before = hwm()
here = ArtifactStore(sys.argv[1]).fetch(art)
after = hwm()
print(json.dumps({"before_kib": before, "peak_kib": after, "fetched": here is not None}))
"""


def _entry(cache: Path, mib: int) -> dict[str, object]:
    """A build host's entry with a build log of mib MiB; the artifact, as a dict."""
    os.environ["KBISECT_CACHE"] = str(cache)
    from kbisect.builders import artifact_cache
    from kbisect.model import Artifact

    adir = artifact_cache.entry_dir(TREE, CFG)
    adir.mkdir(parents=True)
    image = b"\x7fkernel image " * 1000
    (adir / "bzImage").write_bytes(image)
    (adir / "config").write_text("CONFIG_NVME=y\n")
    with open(adir / "build.log", "wb") as log:
        line = b"  CC      drivers/nvme/host/core.o\n" * 1024
        for _ in range(mib * (1 << 20) // len(line)):
            log.write(line)
    paths = {"kernel": "bzImage", "config": "config", "build_log": "build.log"}
    sha = hashlib.sha256(image).hexdigest()
    art = Artifact("1" * 40, TREE, CFG, **{k: str(adir / v) for k, v in paths.items()})
    art = replace(art, image_sha256=sha)
    artifact_cache.store(adir, art)
    return asdict(art)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=512, help="the build log's size in MiB")
    ap.add_argument("--file-store", action="store_true", help="a file:// store instead of WebDAV")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbisect-store-mem-") as tmp:
        root = Path(tmp)
        art = _entry(root / "build-host", args.mib)
        context = (
            nullcontext(f"file://{root / 'store'}")
            if args.file_store
            else (nginx.webdav(root / "nginx"))
        )
        with context as url:
            from kbisect.builders.artifact_store import ArtifactStore
            from kbisect.model import Artifact

            ArtifactStore(url).publish(Artifact(**art))  # type: ignore[arg-type]
            env = {**os.environ, "KBISECT_CACHE": str(root / "vm-host")}
            out = subprocess.run(
                [sys.executable, "-c", CHILD, url, json.dumps(art)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
        got = json.loads(out.stdout)
        store = "file://" if args.file_store else "WebDAV (nginx)"
        print(f"store: {store}; build.log: {args.mib} MiB; fetched: {got['fetched']}")
        print(f"peak RSS before the fetch: {got['before_kib'] / 1024:.0f} MiB")
        print(f"peak RSS after the fetch:  {got['peak_kib'] / 1024:.0f} MiB")
        grew = (got["peak_kib"] - got["before_kib"]) / 1024
        print(f"growth: {grew:.0f} MiB ({grew / args.mib:.2f} x the file)")


if __name__ == "__main__":
    main()
