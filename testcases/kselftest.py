"""The `kselftest:TARGET[:TEST]` kind: a kernel selftest as a pass/fail testcase.

The selftests come from one revision for the whole job: a job pins its name to that
revision's full hash (`kselftest:timers:posix_timers:<40 hex>`, `pin`), by default its new
end, or `--selftests-from REV`. The pinned name renders on any host that has the built
selftests in its cache, or the tree to build them from (builders.selftests): the testcase
folder holds the target's install as a tar (at most 4 MiB compressed: it travels in the
guest's initramfs as the testcase's files), the target's `config` as its fragment, and
the KTAP reader (testcases.ktap), which the guest runs with the host userland's python3
to turn the runner's output into `git bisect run`'s status.
"""

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from kbisect.builders import kernel_list, selftests
from kbisect.errors import UnknownTestcaseError, UserError
from kbisect.infra.atomic_write import publish_folder
from kbisect.infra.git import Git
from kbisect.testcases import ktap

KIND = "kselftest"
USAGE = "kselftest:TARGET[:TEST]"
PART_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # whole: fullmatch
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
RUN_SECONDS = 900  # the runner's own timeout in the guest (each test has kselftest's too)
# A target with no config: the other kinds' fragment, word for word (kinds.FRAGMENT), so
# their kernels are one build (a config's key hashes its fragments' text).
FRAGMENT = "# nothing beyond the base config and the host userland's options\n"
KTAP_FILE = "ktap.py"


@dataclass(frozen=True)
class Spec:
    target: str
    test: str = ""  # "": the whole target
    commit: str = ""  # the selftests' revision, a full hash ("": not pinned yet)

    @property
    def selection(self) -> str:
        return f"{self.target}:{self.test}" if self.test else self.target


def is_kselftest(name: str) -> bool:
    return name.partition(":")[0] == KIND


def parse(args: list[str]) -> Spec:
    """A kselftest name's arguments (after `kselftest:`), checked; a last argument of 40
    hex digits is the pinned revision."""
    commit = args[-1] if args and COMMIT_RE.fullmatch(args[-1]) else ""
    parts = args[:-1] if commit else args
    if not parts:
        raise UserError(f"name a selftests target: {USAGE}, e.g. kselftest:timers:posix_timers")
    if len(parts) > 2:
        raise UserError(f"too many arguments: {USAGE}")
    for part in parts:
        if not PART_RE.fullmatch(part):
            raise UnknownTestcaseError(
                f"{part!r} is no selftests target or test name (letters, digits and _ . -): {USAGE}"
            )
    return Spec(parts[0], parts[1] if len(parts) > 1 else "", commit)


def _args(name: str) -> list[str]:
    kind, _, rest = name.partition(":")
    if kind != KIND:
        raise UnknownTestcaseError(f"{name!r} is not a {USAGE} name")
    return rest.split(":") if rest else []


def spec_of(name: str) -> Spec:
    return parse(_args(name))


def pin(name: str, repo: Path, rev: str = "") -> str:
    """`name` pinned to `rev` of `repo` resolved to its full hash (a name pinned already is
    kept when no `rev` is given). UserError: `rev` is not in `repo`."""
    spec = spec_of(name)
    if not rev:
        if not spec.commit:
            raise UserError(f"{name}: give the revision to take the selftests from")
        rev = spec.commit
    commit = Git(repo).resolve(rev)
    return ":".join([KIND, spec.target, *([spec.test] if spec.test else []), commit])


def unpinned(name: str) -> str:
    spec = spec_of(name)
    return f"{KIND}:{spec.selection}"


def _manifest(name: str, spec: Spec) -> str:
    description = (
        f"kselftest {spec.selection} from {spec.commit[:12]}: a failing test is bad, every "
        "test passing good, a skip or no result cannot test"
    )
    params = {"KSELFTEST_TARGET": spec.target, "KSELFTEST_TEST": spec.test}
    params["KSELFTEST_SECONDS"] = str(RUN_SECONDS)
    return "\n".join(
        [
            f"# {description}",
            f"name = {json.dumps(name)}",
            f"description = {json.dumps(description)}",
            'verdict = "pass-fail"',
            f"timeout = {RUN_SECONDS + 300}",
            'tools = ["bash", "python3", "tar", "gzip", "timeout"]',
            'config = "config.fragment"',
            'script = "guest.sh"',
            'userland = "host"',
            f'files = ["{selftests.TARBALL}", "{KTAP_FILE}"]',
            "",
            "[params]",
            *(f"{key} = {json.dumps(value)}" for key, value in params.items()),
            "",
        ]
    )


SCRIPT = f"""\
# kselftest: the selftests built on the host (/kbisect/{selftests.TARBALL}) run by their
# runner with the host userland's bash; its TAP read by ktap.py into git bisect run's status.
for tool in bash python3 tar timeout; do
	command -v "$tool" > /dev/null || {{ echo "kbisect: no $tool in the host userland"; exit 125; }}
done
dir=/tmp/kselftest
mkdir -p "$dir"
tar -xzf /kbisect/{selftests.TARBALL} -C "$dir" || {{ echo "kbisect: cannot unpack"; exit 125; }}
cd "$dir"
if [ -n "$KSELFTEST_TEST" ]; then
	set -- -t "$KSELFTEST_TARGET:$KSELFTEST_TEST"
else
	set -- -c "$KSELFTEST_TARGET"
fi
echo 0 > /tmp/kselftest.rc
{{ timeout -k 10 "$KSELFTEST_SECONDS" bash ./run_kselftest.sh "$@" 2>&1 \\
	|| echo "$?" > /tmp/kselftest.rc; }} | tee /tmp/kselftest.out
status=0
python3 /kbisect/{KTAP_FILE} /tmp/kselftest.out "$(cat /tmp/kselftest.rc)" || status=$?
case "$status" in
0 | 1 | 125) ;;
*) echo "kbisect: the KTAP reader failed ($status)"; status=125 ;;
esac
exit "$status"
"""


def _digest() -> str:
    """The template's version: the script and the reader (an upgrade renders anew)."""
    reader = Path(ktap.__file__).read_bytes()
    return hashlib.sha256(SCRIPT.encode() + b"\0" + reader).hexdigest()[:12]


def folder_of(name: str, cache: Path) -> Path:
    spec = spec_of(name)
    parts = "-".join(p for p in (spec.target, spec.test) if p)
    return cache / "testcase-kinds" / f"{KIND}-{parts}-{spec.commit}-{_digest()}"


def materialize(name: str, cache: Path, repo: Path | None) -> Path:
    """The testcase folder of a pinned kselftest name: from the cache, or its selftests
    built from `repo` (UserError: not pinned, no tree to build from, no such target or
    test)."""
    spec = spec_of(name)
    if not spec.commit:
        raise UserError(
            f"{name} takes its selftests from a kernel tree: give --repo DIR (and "
            "--selftests-from REV, or the kernel's revision)"
        )
    folder = folder_of(name, cache)
    if (folder / "manifest.toml").is_file():
        return folder
    if repo is None:
        raise UserError(f"{name}: its selftests are not built on this host and no tree was given")
    built = selftests.build(repo, spec.commit, spec.target, cache)
    if spec.test and spec.selection not in built.tests:
        raise UnknownTestcaseError(
            f"no test {spec.test!r} in selftests target {spec.target!r} at {spec.commit[:12]}: "
            f"it has {', '.join(t.partition(':')[2] for t in built.tests[:20]) or 'none'}"
        )

    def fill(partial: Path) -> None:
        (partial / "manifest.toml").write_text(_manifest(name, spec))
        (partial / "guest.sh").write_text(SCRIPT)
        (partial / "config.fragment").write_text(built.config or FRAGMENT)
        shutil.copyfile(built.tarball, partial / selftests.TARBALL)
        shutil.copyfile(ktap.__file__, partial / KTAP_FILE)
        partial.chmod(0o755)

    return publish_folder(folder, fill, "manifest.toml")


def job_testcase(name: str, repo: Path, new: str, selftests_from: str = "") -> str:
    """A job's testcase name: a kselftest's pinned to `selftests_from` resolved in `repo`,
    else (not pinned yet) to the job's new end `new`; any other name as given.
    UserError: --selftests-from for another testcase, or a job with no tree to take them
    from (prebuilt kernels)."""
    if not is_kselftest(name):
        if selftests_from:
            raise UserError(f"--selftests-from is for {USAGE} testcases, not {name}")
        return name
    if selftests_from:
        return pin(name, repo, selftests_from)
    if spec_of(name).commit:
        return name
    if kernel_list.is_kernel_list(repo):
        raise UserError(
            f"{name}: this job's kernels are prebuilt, with no tree to take the selftests "
            "from: give --selftests-from REV of a kernel tree (--repo DIR)"
        )
    return pin(name, repo, new)
