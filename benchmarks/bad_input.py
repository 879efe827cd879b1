"""Malformed invocations and settings, each run as a user would run it: how many give one
clean line (`kbisect: error: ...`, exit 2 to 6), how many argparse's usage and its error
line, and what the others do (a traceback, several lines, exit 0, a hang).

Each runs `python -m kbisect` in a folder of its own (cache, data and lock folders made
for the run, a Temporal address where nothing listens, `--no-start` where a command takes
it), so nothing touches your own kbisect. Run from the repository:

    python -m benchmarks.bad_input [--show-clean]
"""

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.nginx import free_port

TIMEOUT = 60.0


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def _c(*argv: str, **env: str) -> Case:
    return Case(argv, tuple(env.items()))


def cases(repo: Path, tmp: Path) -> list[Case]:
    """The malformed invocations: bad revisions, options, paths, names and settings."""
    r = str(repo)
    b = ("bisect", "--repo", r, "--testcase", "nvme-snapshot-read", "--no-start")
    gb = ("--good", "t1", "--bad", "t3")
    s = ("sweep", "--repo", r, "--testcase", "nvme-snapshot-read", "--no-start")
    w = ("series", "watch", "w", "--testcase", "nvme-snapshot-read", "--no-start")
    fifo, huge, folder = tmp / "fifo", tmp / "huge.pem", tmp / "a-folder"
    return [
        # bisect: revisions, testcases, options
        _c(*b, "--good", "nope", "--bad", "t3"),
        _c(*b, "--good", "t1", "--bad", "nope"),
        _c(*b, "--good", "t1"),
        _c(*b, "--bad", "t3"),
        _c(*b, "--good", "t3", "--bad", "t3"),
        _c(*b, "--good", "--upload-pack=x", "--bad", "t3"),
        _c(*b, "--good", "t1;id", "--bad", "t3"),
        _c(*b, "--good", "t1", "--bad", "$(id)"),
        _c("bisect", "--repo", "/nonexistent", *gb, "--testcase", "boots", "--no-start"),
        _c("bisect", "--repo", "/proc", *gb, "--testcase", "boots", "--no-start"),
        _c("bisect", "--repo", str(tmp), *gb, "--testcase", "boots", "--no-start"),
        _c("bisect", "--repo", r, *gb, "--testcase", "no-such", "--no-start"),
        _c("bisect", "--repo", r, *gb, "--testcase", "../etc", "--no-start"),
        _c("bisect", "--repo", r, *gb, "--no-start"),
        _c(*b, *gb, "--mode", "sideways"),
        _c(*b, *gb, "--profile", "floppy"),
        _c(*b, *gb, "--repetitions", "0"),
        _c(*b, *gb, "--repetitions", "100000"),
        _c(*b, *gb, "--repetitions", "x"),
        _c(*b, *gb, "--parallel", "0"),
        _c(*b, *gb, "--parallel", "1000"),
        _c(*b, *gb, "--metric", "nope"),
        _c(*b, *gb, "--min-effect", "0"),
        _c(*b, *gb, "--min-effect", "100"),
        _c(*b, *gb, "--min-effect", "nan"),
        _c(*b, *gb, "--min-effect", "-5"),
        _c(*b, *gb, "--max-boots", "2"),
        _c(*b, *gb, "--max-boots", "99999999999999999999"),
        _c(*b, *gb, "--signature", "BUG"),
        _c(*b, *gb, "--flaky"),
        _c(*b, *gb, "--config", "/nonexistent"),
        _c(*b, *gb, "--config", str(fifo)),
        _c(*b, *gb, "--config", "/dev/zero"),
        _c(*b, *gb, "--config", str(folder)),
        _c("bisect", "--repo", r, *gb, "--testcase", "boots", "--signature", "(a)\\1"),
        _c("bisect", "--repo", r, *gb, "--testcase", "boots", "--signature", "(x"),
        _c("bisect", "--repo", r, *gb, "--testcase", "boots", "--signature", "x" * 300),
        _c("bisect", "--repo", r, *gb, "--testcase", "boots", "--duets", "--no-start"),
        _c("bisect", "--repo", r, *gb, "--testcase", "sched-pipe", "--trace", "--no-start"),
        _c("bisect", "--repo", r, "--tree", "t", *gb, "--testcase", "boots"),
        _c("bisect", "--tree", "nope", *gb, "--testcase", "boots", "--no-start"),
        _c("bisect", "--tree", "Bad/Name", *gb, "--testcase", "boots", "--no-start"),
        _c("bisect", "--kernels", "a.deb", "--testcase", "boots", "--no-start"),
        _c("bisect", "--repo", r, *gb, "--testcase", "boots", "--fixup", "/dev/zero"),
        _c("bisect", "--repo", r, *gb, "--testcase", "boots", "--fixup", "/etc/hostname"),
        # try
        _c("try", "--repo", r, "nope", "--testcase", "boots"),
        _c("try", "--repo", r, "t1", "--testcase", "no-such"),
        _c("try", "--kernel", "nope.deb", "--testcase", "boots"),
        _c("try", "--kernel", "bad name!", "--testcase", "boots"),
        _c("try", "--kernel", "/etc/hostname", "--modules", "/nonexistent", "--testcase", "boots"),
        _c("try", "--repo", r, "t1", "--testcase", "boots", "--profile", "floppy"),
        _c("try", "--repo", r, "t1", "--testcase", "boots", "--repetitions", "-1"),
        _c("try", "--testcase", "boots"),
        _c("try", "--repo", r, "t1", "--testcase", "boots", "--patch", "/nonexistent.patch"),
        _c("try", "--repo", r, "t1", "--testcase", "boots", "--patch", "/dev/zero"),
        _c("try", "--repo", r, "t1", "--testcase", "boots", "--patch", "/etc/hostname"),
        _c("try", "--kernel", "x.deb", "--testcase", "boots", "--patch", "/etc/hostname"),
        # sweep
        _c(*s, "t1"),
        _c(*s, *[f"no-such-{i}" for i in range(500)]),
        _c(*s, "t1", "nope"),
        _c(*s, "t1", "t3", "--boots", "2"),
        _c(*s, "t1", "t3", "--boots", "99999999999999999999"),
        _c(*s, "t1", "t3", "--min-effect", "200"),
        _c(*s, "t1", "t3", "--metric", "nope"),
        _c(*s, "t1", "t3", "--testcase", "boots"),
        _c(*s, "t1", "t3", "--plot", "/proc/x.png"),
        _c(*s, "t1", "t3", "--plot", str(folder)),
        _c(*s, "t1", "--kernels", "a.deb,b.deb"),
        _c("sweep", "--kernels", "a,b", "--testcase", "boots", "--no-start"),
        _c("sweep", "--testcase", "nvme-snapshot-read", "--no-start"),
        # series
        _c(*w),
        _c(*w, "--tree", "nope"),
        _c(*w, "--apt", "bash*"),
        _c(*w, "--tree", "t", "--apt", "linux-image-*"),
        _c(*w, "--tree", "t", "--tags", "$(id)"),
        _c(*w, "--tree", "t", "--every", "5"),
        _c(*w, "--tree", "t", "--every", "0m"),
        _c(*w, "--tree", "t", "--boots", "2"),
        _c(*w, "--tree", "t", "--boots", "5001"),
        _c("series", "watch", "Bad Name", "--tree", "t", "--testcase", "boots", "--no-start"),
        _c("series", "show", "Bad Name", "--no-start"),
        _c("series", "remove", "../x", "--no-start"),
        _c("series", "check", "x" * 100, "--no-start"),
        # jobs by id
        _c("report", "not a job", "--no-start"),
        _c("report", "x" * 500, "--no-start"),
        _c("report", "bisect-x-1", "--plot", "/proc/x.png", "--no-start"),
        _c("report", "bisect-x-1", "--plot", "/dev/full", "--no-start"),
        _c("report", "bisect-x-1", "--bisect-log", str(folder), "--no-start"),
        _c("report", "bisect-x-1", "--bisect-log", "/proc/x", "--no-start"),
        _c("report", "bisect-x-1", "--sru", "--bug", "-5", "--no-start"),
        _c("report", "bisect-x-1", "--sru", "--bug", "x", "--no-start"),
        _c("report", "bisect-x-1", "--sru", "--series", "Not A Series", "--no-start"),
        _c("mark", "bisect-x-1", "t1", "maybe", "--no-start"),
        _c("mark", "bad id!", "t1", "good", "--no-start"),
        _c("watch", "bad id!", "--no-start"),
        _c("cancel", "--no-start"),
        _c("resume", "bad id!", "--no-start"),
        _c("status", "--limit", "0", "--no-start"),
        _c("status", "--limit", "-1", "--no-start"),
        # lab, gc, trees, testcases
        _c("lab", "create", "/proc/lab"),
        _c("lab", "create", "/etc/hostname"),
        _c("lab", "create", str(tmp / "not-a-lab"), "--replace"),
        _c("lab", "create", str(tmp / "lab"), "--commits", "0"),
        _c("lab", "create", str(tmp / "lab"), "--commits", "-3"),
        _c("lab", "create", str(tmp / "lab"), "--culprit-at", "999", "--commits", "10"),
        _c("lab", "create", str(tmp / "lab"), "--culprit-patch", "/nonexistent"),
        _c("lab", "create", str(tmp / "lab"), "--broken-build", "x-y"),
        _c("gc", "--older-than", "nan"),
        _c("gc", "--older-than", "-1"),
        _c("gc", "--repo", "/proc", "--dry-run"),
        _c("tree", "add", "Bad Name", "/x"),
        _c("tree", "add", "t", "ext::sh -c id"),
        _c("tree", "add", "t", "relative/path"),
        _c("tree", "add", "t", "/x", "--branch=--upload-pack=x"),
        _c("tree", "fetch", "nope"),
        _c("tree", "remove", "nope"),
        _c("testcase", "check", "no-such"),
        _c("testcase", "new", "Bad Name"),
        _c("testcase", "new", "boots"),
        _c("testcase", "new", "mine", "--dir", "/proc"),
        # the doors' own options
        _c("chat", "matrix", "--homeserver", "x", "--user", "@a:b", "--password-file", "/nope"),
        _c(
            "chat",
            "matrix",
            "--homeserver",
            "http://x",
            "--user",
            "a",
            "--password-file",
            str(fifo),
        ),
        _c("gitlab", "serve", "--url", "http://x", "--token-file", "/dev/zero"),
        _c("gitlab", "serve", "--url", "ftp://x", "--token-file", str(huge)),
        # worker options
        _c("worker", "--builds", "-1"),
        _c("worker", "--measure-cpus", "99-1"),
        _c("worker", "--machine", "vmware"),
        # malformed settings
        _c("status", "--no-start", KBISECT_JOBS="²"),
        _c("status", "--no-start", KBISECT_ACCEL="fast"),
        _c("status", "--no-start", KBISECT_MACHINE="xen"),
        _c("status", "--no-start", KBISECT_TEMPORAL_ADDRESS="nohost"),
        _c("status", "--no-start", KBISECT_TEMPORAL_ADDRESS="h:99999"),
        _c("status", "--no-start", KBISECT_HOST_NAME="bad name"),
        _c("status", "--no-start", KBISECT_STORE="ftp://alice:pw@h/kb"),
        _c("status", "--no-start", KBISECT_CCACHE_REMOTE="s3://b"),
        _c("status", "--no-start", KBISECT_TEMPORAL_TLS="maybe"),
        _c("status", "--no-start", KBISECT_TEMPORAL_TLS_CERT="/x.pem"),
        _c("status", "--no-start", KBISECT_TEMPORAL_TLS_CA=str(fifo)),
        _c("status", "--no-start", KBISECT_TEMPORAL_TLS_CA="/dev/zero"),
        _c("status", "--no-start", KBISECT_TEMPORAL_TLS_CA=str(huge)),
        _c("status", "--no-start", KBISECT_CACHE="/etc/hostname"),
        _c("status", "--no-start", KBISECT_DATA="/proc/x"),
        _c(
            "worker", "--vms", "1", KBISECT_STORE="file:///tmp/kb", KBISECT_STORE_KEY_FILE=str(fifo)
        ),
        _c(
            "worker",
            "--vms",
            "1",
            KBISECT_STORE="file:///tmp/kb",
            KBISECT_STORE_KEY_FILE="/dev/zero",
        ),
    ]


def _verdict(proc: subprocess.CompletedProcess[str] | None) -> str:
    if proc is None:
        return "hang"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    if proc.returncode == 0:
        return "exit 0"
    if "Traceback" in proc.stderr:
        return "traceback"
    if len(lines) == 1 and lines[0].startswith("kbisect: error: ") and 2 <= proc.returncode <= 6:
        return "one line"
    if lines and lines[0].startswith("usage: ") and ": error: " in lines[-1]:
        return "usage and one error line"
    return f"{len(lines)} lines, exit {proc.returncode}"


def _repo(path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", "-b", "master", str(path)], check=True)
    for n in (1, 2, 3):
        (path / "f").write_text(f"{n}\n")
        subprocess.run(["git", "-C", str(path), "add", "f"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-qm", f"c{n}"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "tag", f"t{n}"], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show-clean", action="store_true", help="also list the clean ones")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbisect-bad-input-") as t:
        tmp = Path(t)
        _repo(tmp / "repo")
        os.mkfifo(tmp / "fifo")
        (tmp / "huge.pem").write_bytes(b"-----BEGIN " + b"x" * (2 << 20))
        (tmp / "a-folder").mkdir()
        (tmp / "not-a-lab").mkdir()
        (tmp / "not-a-lab" / "precious").write_text("x\n")
        base = {k: v for k, v in os.environ.items() if not k.startswith("KBISECT_")}
        base |= {
            "KBISECT_CACHE": str(tmp / "cache"),
            "KBISECT_DATA": str(tmp / "data"),
            "KBISECT_LOCK_DIR": str(tmp / "locks"),
            "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",  # nothing listens
        }
        tally: dict[str, list[Case]] = {}
        all_cases = cases(tmp / "repo", tmp)
        for case in all_cases:
            try:
                proc: subprocess.CompletedProcess[str] | None = subprocess.run(
                    [sys.executable, "-m", "kbisect", *case.argv],
                    env={**base, **dict(case.env)},
                    cwd=tmp,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=TIMEOUT,
                )
            except subprocess.TimeoutExpired:
                proc = None
            verdict = _verdict(proc)
            tally.setdefault(verdict, []).append(case)
            if verdict not in ("one line", "usage and one error line") or args.show_clean:
                shown = " ".join(case.argv)[:150]
                settings = " ".join(f"{k}={v}" for k, v in case.env)
                err = (proc.stderr.strip().splitlines() or [""])[-1][:200] if proc else ""
                print(f"{verdict}: {settings} kbisect {shown}\n    {err}")
        print(f"{len(all_cases)} malformed invocations and settings:")
        for verdict, found in sorted(tally.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(found):4d} {verdict}")


if __name__ == "__main__":
    main()
