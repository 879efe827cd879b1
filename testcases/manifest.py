"""Testcase manifests: a folder with manifest.toml, a guest script and a config fragment.

A new testcase is a new folder, not new Python. Every problem with a manifest is one
ManifestError line that names the file and the field.
"""

import grp
import math
import os
import pwd
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kbisect import settings
from kbisect.errors import ManifestError, UnknownTestcaseError, UserError
from kbisect.infra import guest_modules
from kbisect.infra.qemu import PROFILES
from kbisect.model import Direction
from kbisect.testcases import kinds, net_throughput, signature

BUILTIN_DIR = Path(__file__).resolve().parent
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
PARAM_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
PARAM_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:/+-]*$")
METRIC_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
TOOL_RE = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
T = TypeVar("T")
N = TypeVar("N", int, float)
DISK_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,15}$")
# initramfs: busybox and the declared tools with their libraries (boots fastest);
# host: the host's root filesystem read-only, so any installed tool runs (fio, perf).
USERLANDS = ("initramfs", "host")
MAX_DISKS = 8
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
RESERVED_FILES = frozenset({"lib.sh", "testcase.sh", "params.sh", "host-root"})
MAX_FILES_BYTES = 4 << 20
MAX_REPETITIONS = 50
MAX_WARMUP = 10
MAX_TIMEOUT = 6 * 3600.0  # seconds for one boot with the default repetitions
TOP_KEYS = frozenset(
    {"name", "description", "primary", "metrics", "disks", "tools", "config", "script"}
    | {"profile", "repetitions", "warmup", "timeout", "params", "exclusive", "userland"}
    | {"files", "modules", "verdict", "bad", "signature", "flaky", "peer"}
)
# What a boot of the testcase says: a score ("metric"), or good or bad ("pass-fail").
METRIC, PASS_FAIL = "metric", "pass-fail"
VERDICTS = (METRIC, PASS_FAIL)
# A pass/fail testcase's outcomes that make a boot bad: the script failed (exit 1-127,
# not 125), the kernel panicked, the guest hung. The others are skips.
FAILS, PANIC, HANG = "fails", "panic", "hang"
BAD_OUTCOMES = (FAILS, PANIC, HANG)
# A pass/fail testcase's one judged metric: 1 for a good boot, 0 for a bad one (a count:
# one boot decides).
PASSED = "passed"
METRIC_KEYS = frozenset({"unit", "better", "description", "exact"})
# Boots of a job judging an exact metric run this many repetitions (two that agree show
# it is exact) and no warm-up.
EXACT_REPETITIONS = 2
DISK_KEYS = frozenset({"name", "size_mib"})


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    better: Direction
    description: str = ""
    # A count, the same on every run of one kernel (request sizes, not timings): a job
    # judging it needs no warm-up, few repetitions and no host to itself.
    exact: bool = False


@dataclass(frozen=True)
class DiskSpec:
    name: str
    size_mib: int


@dataclass(frozen=True)
class Manifest:
    name: str
    description: str
    folder: Path
    primary: str
    metrics: dict[str, MetricSpec]
    disks: list[DiskSpec]
    tools: list[str]
    config_fragment: str
    script: bytes
    profile: str = "fast"
    repetitions: int = 3
    warmup: int = 0  # repetitions run first in every boot, reported but not scored
    exclusive: bool = True  # a timing: no build or other guest on its CPUs meanwhile
    userland: str = "initramfs"  # or "host": the host's root filesystem, read-only
    files: dict[str, bytes] = field(default_factory=dict)  # shipped to /kbisect/ (fio jobs)
    # Kernel modules the script needs (dm_snapshot): a kernel with loadable modules gets
    # them loaded before the script, a --config build keeps them (localmodconfig).
    modules: list[str] = field(default_factory=list)
    timeout: float = 600.0
    params: dict[str, str] = field(default_factory=dict)
    verdict: str = METRIC
    bad: tuple[str, ...] = BAD_OUTCOMES  # pass-fail: the outcomes that make a boot bad
    # pass-fail: a bad boot must show this regular expression on its console (the culprit's
    # panic message); a bad outcome without it is a skip
    signature: str = ""
    flaky: bool = False  # pass-fail: the failure comes and goes (a posterior, many boots)
    # A program the host runs beside each boot (net_throughput.PEER: iperf3's client,
    # connecting in to the guest); "" for none.
    peer: str = ""

    @property
    def pass_fail(self) -> bool:
        return self.verdict == PASS_FAIL

    @property
    def peer_options(self) -> tuple[str, ...]:
        """The host peer's options from the params (checked at load); () without a peer."""
        return net_throughput.peer_options(self.params) if self.peer else ()

    def repetitions_for(self, metric: str) -> int:
        """A job's repetitions per boot when it judges `metric`."""
        spec = self.metrics.get(metric)
        return min(EXACT_REPETITIONS, self.repetitions) if spec and spec.exact else self.repetitions

    def timeout_for(self, repetitions: int) -> float:
        """`timeout` covers one boot with the default repetitions; more take longer."""
        return self.timeout * max(1.0, repetitions / max(1, self.repetitions))


def user_dir(data: Path) -> Path:
    """The user's own testcases (`kbisect testcase new` writes there by default)."""
    return data / "testcases"


def search_path() -> list[Path]:
    """Built-in testcases, the user's, then folders listed in KBISECT_TESTCASES."""
    s = settings.Settings.from_env()
    return [BUILTIN_DIR, user_dir(s.data), *s.testcase_dirs]


def available() -> list[str]:
    """Names of the testcase folders that `find` accepts (see `catalog` for all of them)."""
    names: set[str] = set()
    for root in search_path():
        if root.is_dir():
            names.update(
                p.parent.name for p in root.glob("*/manifest.toml") if NAME_RE.match(p.parent.name)
            )
    return sorted(names)


@dataclass(frozen=True)
class Entry:
    """One testcase folder in the library: its manifest, or why it does not load."""

    name: str
    folder: Path
    manifest: Manifest | None
    error: str = ""


def catalog() -> list[Entry]:
    """Every testcase folder, loaded; a malformed one comes with its error rather than
    hiding the others. As in `find`, the first folder of a name on the search path wins."""
    entries: dict[str, Entry] = {}
    for root in search_path():
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*/manifest.toml")):
            folder = path.parent
            if folder.name in entries:
                continue
            try:
                entries[folder.name] = Entry(folder.name, folder, load_folder(folder))
            except ManifestError as exc:
                entries[folder.name] = Entry(folder.name, folder, None, str(exc))
    return [entries[name] for name in sorted(entries)]


def find(name: str, repo: Path | None = None) -> Path:
    """The folder of testcase `name`: the library's, or a kind's rendered into the cache
    (`stress-ng:switch`; a library folder named as a bare kind wins); a kselftest's built
    from the kernel tree `repo` when this host has not built it yet."""
    if NAME_RE.match(name):
        for root in search_path():
            folder = root / name
            if (folder / "manifest.toml").is_file():
                return folder
    if kinds.split(name) is not None:
        return kinds.materialize(name, settings.Settings.from_env().cache, repo)
    if not NAME_RE.match(name) and ":" not in name:
        raise UnknownTestcaseError(
            f"invalid testcase name {name!r}: use lowercase letters, digits and dashes"
        )
    raise UnknownTestcaseError(
        f"unknown testcase {name!r}: known are {', '.join(available()) or 'none'}; " + kinds.usage()
    )


def load(name: str, repo: Path | None = None) -> Manifest:
    folder = find(name, repo)
    return load_folder(folder, name if folder.name != name else None)


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "a table"}


def _check_type(value: object, typ: type[T], key: str, where: str) -> T:
    # TOML booleans are ints to Python: refuse them where a number is meant.
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, typ) or (typ in (int, float) and isinstance(value, bool)):
        got = repr(value) if len(repr(value)) <= 40 else type(value).__name__
        raise ManifestError(
            f"{where}: field '{key}' must be {_TYPE_NAMES.get(typ, typ.__name__)}, not {got}"
        )
    return value


def _req(data: dict[str, Any], key: str, typ: type[T], where: str) -> T:
    if key not in data:
        raise ManifestError(f"{where}: missing required field '{key}'")
    return _check_type(data[key], typ, key, where)


def _opt(data: dict[str, Any], key: str, typ: type[T], where: str, default: T) -> T:
    return _check_type(data[key], typ, key, where) if key in data else default


def _only(data: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    """Unknown keys are refused: a typo (`primery`) must not silently mean a default."""
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ManifestError(
            f"{where}: unknown field '{unknown[0]}' (known: {', '.join(sorted(allowed))})"
        )


def _bounded(value: N, key: str, lo: float, hi: float, where: str) -> N:
    # TOML allows nan and inf: they compare False with everything, so test them first.
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ManifestError(f"{where}: field '{key}' must be within {lo:g}..{hi:g}, not {value}")
    return value


def _name(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


def _name_group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _private_group(gid: int, uid: int) -> bool:
    """The owner's own group (umask 002 systems): named after them, their primary one,
    with no other member."""
    try:
        group, owner = grp.getgrgid(gid), pwd.getpwuid(uid)
    except KeyError:
        return False
    alone = set(group.gr_mem) <= {owner.pw_name}
    return owner.pw_gid == gid and group.gr_name == owner.pw_name and alone


def _trusted_owners() -> set[int]:
    """Root, this user, and whoever owns kbisect's code (who controls this process
    anyway: root running a user's checkout)."""
    return {0, os.geteuid(), BUILTIN_DIR.stat().st_uid}


def check_private(path: Path, st: os.stat_result) -> None:
    """A testcase's script runs as root in a guest that can read the host's files: no one
    but a trusted owner may be able to change a testcase's folder or files."""
    if st.st_uid not in _trusted_owners():
        why, fix = f"belongs to {_name(st.st_uid)}", "copy the testcase to a folder of yours"
    elif st.st_mode & stat.S_IWOTH:
        why, fix = "is writable by every user", f"run chmod go-w {path}"
    elif st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid, st.st_uid):
        why, fix = f"is writable by group {_name_group(st.st_gid)}", f"run chmod go-w {path}"
    else:
        return
    raise ManifestError(
        f"{path} {why}, and a testcase runs in a guest that can read the host's files: {fix}"
    )


def load_folder(folder: Path, kind_name: str | None = None) -> Manifest:
    """The testcase in `folder`, named as its folder; or, rendered from a kind, `kind_name`
    (the folder is the cache's)."""
    path = folder / "manifest.toml"
    where = str(path)
    if kind_name is None and not NAME_RE.match(folder.name):
        raise ManifestError(
            f"{where}: folder name '{folder.name}' is not a valid testcase name: "
            "use lowercase letters, digits and dashes"
        )
    try:
        check_private(folder, folder.stat())
    except OSError as exc:
        raise ManifestError(f"{folder}: cannot read ({exc.strerror})") from exc
    data = _read_toml(path)
    _only(data, TOP_KEYS, where)
    name = _req(data, "name", str, where)
    if name != (kind_name or folder.name):
        raise ManifestError(f"{where}: name '{name}' must match its folder '{folder.name}'")
    verdict = _opt(data, "verdict", str, where, METRIC)
    if verdict not in VERDICTS:
        raise ManifestError(
            f"{where}: field 'verdict' must be one of {', '.join(VERDICTS)}, not '{verdict}'"
        )
    pass_fail = verdict == PASS_FAIL
    if pass_fail:
        metrics, primary = _pass_fail_metrics(data, where)
    else:
        for key in ("bad", "signature", "flaky"):
            if key in data:
                raise ManifestError(f"{where}: field '{key}' is for verdict = \"{PASS_FAIL}\"")
        metrics = _metrics(_req(data, "metrics", dict, where), where)
        primary = _req(data, "primary", str, where)
        if primary not in metrics:
            raise ManifestError(f"{where}: primary metric '{primary}' is not among [metrics]")
    profile = _opt(data, "profile", str, where, "fast")
    if profile not in PROFILES:
        raise ManifestError(
            f"{where}: field 'profile' must be one of {', '.join(PROFILES)}, not '{profile}'"
        )
    config = _opt(data, "config", str, where, "")
    fragment = _fragment(folder, config, where) if config else ""
    params = _params(data.get("params", {}), where)
    return Manifest(
        name=name,
        description=_opt(data, "description", str, where, ""),
        folder=folder,
        primary=primary,
        metrics=metrics,
        disks=_disks(data.get("disks", []), where),
        tools=_tools(data.get("tools", []), where),
        config_fragment=fragment,
        script=_file(folder, _req(data, "script", str, where), where),
        profile=profile,
        repetitions=_bounded(
            _opt(data, "repetitions", int, where, 1 if pass_fail else 3),
            "repetitions",
            1,
            MAX_REPETITIONS,
            where,
        ),
        warmup=_bounded(_opt(data, "warmup", int, where, 0), "warmup", 0, MAX_WARMUP, where),
        # a pass/fail verdict is no timing: it needs no host to itself
        exclusive=_opt(data, "exclusive", bool, where, not pass_fail),
        userland=_userland(_opt(data, "userland", str, where, "initramfs"), where),
        files=_files(folder, data.get("files", []), where),
        modules=_modules(data.get("modules", []), where),
        timeout=_bounded(
            _opt(data, "timeout", float, where, 600.0), "timeout", 1.0, MAX_TIMEOUT, where
        ),
        params=params,
        verdict=verdict,
        bad=_bad(data.get("bad", list(BAD_OUTCOMES)), where),
        signature=_signature(_opt(data, "signature", str, where, ""), where),
        flaky=_opt(data, "flaky", bool, where, False),
        peer=_peer(_opt(data, "peer", str, where, ""), params, where),
    )


def _peer(peer: str, params: dict[str, str], where: str) -> str:
    """The one peer there is, its params checked now rather than at the first boot."""
    if not peer:
        return ""
    if peer != net_throughput.PEER:
        raise ManifestError(
            f"{where}: field 'peer' must be \"{net_throughput.PEER}\" (the only peer), not {peer!r}"
        )
    try:
        net_throughput.peer_options(params)
    except ValueError as exc:
        raise ManifestError(f"{where}: peer {peer}: {exc}") from exc
    return peer


def _pass_fail_metrics(data: dict[str, Any], where: str) -> tuple[dict[str, MetricSpec], str]:
    """A pass/fail testcase is judged on `passed`; metrics it reports are shown beside."""
    if "primary" in data:
        raise ManifestError(
            f"{where}: a pass-fail testcase is judged on whether each boot passes: drop 'primary'"
        )
    metrics = _metrics(_opt(data, "metrics", dict, where, {}), where)
    if PASSED in metrics:
        raise ManifestError(f"{where}: metric '{PASSED}' is the pass-fail verdict's own name")
    passed = MetricSpec(
        PASSED, "boots", Direction.HIGHER, "1 for a good boot, 0 for a bad one", True
    )
    return {PASSED: passed, **metrics}, PASSED


def _bad(raw: object, where: str) -> tuple[str, ...]:
    if (
        not isinstance(raw, list)
        or not raw
        or not all(isinstance(b, str) and b in BAD_OUTCOMES for b in raw)
    ):
        raise ManifestError(
            f"{where}: field 'bad' must be a non-empty list of {', '.join(BAD_OUTCOMES)}"
        )
    return tuple(b for b in BAD_OUTCOMES if b in raw)


def job_flaky(manifest: Manifest, given: bool) -> bool:
    """Whether a job's pass/fail boots are weighed as flaky (--flaky, or the testcase)."""
    if given and not manifest.pass_fail:
        raise UserError(
            f"--flaky is for pass-fail testcases; {manifest.name} is judged on a metric, whose "
            "noise the engine measures by itself"
        )
    return manifest.pass_fail and (given or manifest.flaky)


def job_signature(manifest: Manifest, given: str) -> str:
    """A job's --signature, checked (UserError), else the testcase's own."""
    if not given:
        return manifest.signature
    if not manifest.pass_fail:
        raise UserError(
            f"--signature is for pass-fail testcases; {manifest.name} is judged on a metric"
        )
    try:
        signature.compile_signature(given)
    except signature.SignatureError as exc:
        raise UserError(f"--signature {exc}: give a shorter or valid pattern") from exc
    return given


def _signature(text: str, where: str) -> str:
    try:
        signature.compile_signature(text)
    except signature.SignatureError as exc:
        raise ManifestError(f"{where}: field 'signature' {exc}") from exc
    return text


def _files(folder: Path, raw: object, where: str) -> dict[str, bytes]:
    """Extra files of the folder the guest script reads from /kbisect/ (fio job files)."""
    if not isinstance(raw, list) or not all(isinstance(f, str) for f in raw):
        raise ManifestError(f"{where}: field 'files' must be a list of file names")
    files = {}
    for name in raw:
        if not FILE_NAME_RE.match(name) or name in RESERVED_FILES:
            raise ManifestError(
                f"{where}: files entry {name!r} must be a plain file name in the folder "
                f"(letters, digits, ._-), not one of {', '.join(sorted(RESERVED_FILES))}"
            )
        files[name] = _file(folder, name, where, "files entry")
    if sum(len(b) for b in files.values()) > MAX_FILES_BYTES:
        raise ManifestError(f"{where}: files add up to more than {MAX_FILES_BYTES >> 20} MiB")
    return files


def _modules(raw: object, where: str) -> list[str]:
    if not isinstance(raw, list) or not all(
        isinstance(m, str) and guest_modules.MODULE_RE.match(m) for m in raw
    ):
        raise ManifestError(
            f"{where}: field 'modules' must be a list of module names (dm_snapshot, dm-mod)"
        )
    return list(dict.fromkeys(guest_modules.canonical(m) for m in raw))


def _userland(value: str, where: str) -> str:
    if value not in USERLANDS:
        raise ManifestError(
            f"{where}: field 'userland' must be one of {', '.join(USERLANDS)}, not '{value}'"
        )
    return value


def _read_private(path: Path) -> bytes:
    """The file's bytes, checked on the very file read (an fstat of the open file): a
    swap after a check of the path would go unseen."""
    with path.open("rb") as f:
        check_private(path, os.fstat(f.fileno()))
        return f.read()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_read_private(path).decode())
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path}: not UTF-8 text") from exc
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read ({exc.strerror})") from exc


def _metrics(raw: dict[str, Any], where: str) -> dict[str, MetricSpec]:
    metrics = {}
    for mname, spec in raw.items():
        mwhere = f"{where} [metrics.{mname}]"
        if not METRIC_NAME_RE.match(mname):
            # The guest writes the name into a JSON record unescaped.
            raise ManifestError(f"{mwhere}: metric name '{mname}' must be letters, digits, _.-")
        if not isinstance(spec, dict):
            raise ManifestError(f"{mwhere}: must be a table with unit and better")
        _only(spec, METRIC_KEYS, mwhere)
        better = _req(spec, "better", str, mwhere)
        if better not in ("higher", "lower"):
            raise ManifestError(f"{mwhere}: better must be 'higher' or 'lower', not '{better}'")
        metrics[mname] = MetricSpec(
            mname,
            _req(spec, "unit", str, mwhere),
            Direction(better),
            _opt(spec, "description", str, mwhere, ""),
            _opt(spec, "exact", bool, mwhere, False),
        )
    return metrics


def _disks(raw: object, where: str) -> list[DiskSpec]:
    if not isinstance(raw, list):
        raise ManifestError(f"{where}: field 'disks' must be a list of [[disks]] tables")
    if len(raw) > MAX_DISKS:
        raise ManifestError(f"{where}: field 'disks' has {len(raw)} disks, at most {MAX_DISKS}")
    disks: list[DiskSpec] = []
    for i, d in enumerate(raw):
        dwhere = f"{where} [[disks]] #{i + 1}"
        if not isinstance(d, dict):
            raise ManifestError(f"{dwhere}: field 'disks' must hold tables with name and size_mib")
        _only(d, DISK_KEYS, dwhere)
        dname = _req(d, "name", str, dwhere)
        if not DISK_NAME_RE.match(dname):
            raise ManifestError(f"{dwhere}: disk name '{dname}' must be lowercase letters/digits")
        if dname in (seen.name for seen in disks):
            raise ManifestError(f"{dwhere}: disk name '{dname}' is used twice")
        size = _bounded(_req(d, "size_mib", int, dwhere), "size_mib", 1, 65536, dwhere)
        disks.append(DiskSpec(dname, size))
    return disks


def _tools(raw: object, where: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(t, str) and TOOL_RE.match(t) for t in raw):
        raise ManifestError(f"{where}: field 'tools' must be a list of command names")
    return list(raw)


def _params(raw: object, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: field 'params' must be a table of UPPER_CASE names")
    for key, value in raw.items():
        if not PARAM_NAME_RE.match(key) or key.startswith("KB_"):
            raise ManifestError(
                f"{where} [params]: '{key}' must be an UPPER_CASE name not starting with KB_"
            )
        # Baked unquoted into a sourced file in the guest (see infra/initramfs.py).
        if not isinstance(value, str) or not PARAM_VALUE_RE.match(value):
            raise ManifestError(
                f"{where} [params]: {key} must be a string of letters, digits and _.:/+-"
            )
    return dict(raw)


def _file(folder: Path, rel: str, where: str, key: str = "script") -> bytes:
    try:
        path = (folder / rel).resolve()
        if folder.resolve() not in path.parents:
            raise ManifestError(f"{where}: {key} '{rel}' must be a file inside the testcase folder")
        if not path.is_file():
            raise ManifestError(f"{where}: {key} '{rel}' does not exist in {folder}")
        return _read_private(path)
    except (OSError, ValueError) as exc:  # unreadable, or a NUL in the name
        raise ManifestError(f"{where}: {key} '{rel}' cannot be read ({exc})") from exc


# Options that build files from the build host into the kernel image: a testcase could
# otherwise ship a host's keys or files into a guest. Setting them to "" or n is harmless.
HOST_FILE_OPTIONS = frozenset(
    {
        "CONFIG_INITRAMFS_SOURCE",
        "CONFIG_EXTRA_FIRMWARE",
        "CONFIG_EXTRA_FIRMWARE_DIR",
        "CONFIG_SYSTEM_TRUSTED_KEYS",
        "CONFIG_SYSTEM_REVOCATION_KEYS",
        "CONFIG_MODULE_SIG_KEY",
        "CONFIG_SYSTEM_BLACKLIST_HASH_LIST",
        "CONFIG_UNUSED_KSYMS_WHITELIST",
    }
)
_CONFIG_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
# y/m/n, a number, or a string without quotes, escapes or make/shell expansions.
_CONFIG_VALUE = re.compile(r'^(?:[ymn]|-?[0-9]+|0[xX][0-9a-fA-F]+|"[^"\\$`]*")$')


def _fragment(folder: Path, rel: str, where: str) -> str:
    raw = _file(folder, rel, where, "config")
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{where}: config '{rel}' is not UTF-8 text") from exc
    check_fragment(text, str(folder / rel))
    return text


def check_fragment(text: str, where: str) -> None:
    """Only CONFIG_ lines and comments, and none that pulls host files into the kernel."""
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line or line.lstrip().startswith("#"):
            continue
        m = _CONFIG_LINE.match(line)
        if not m:
            raise ManifestError(
                f"{where}:{n}: '{line[:60]}' is not a CONFIG_X=value line or a # comment"
            )
        option, value = m.groups()
        if not _CONFIG_VALUE.match(value):
            raise ManifestError(
                f'{where}:{n}: {option} must be y, m, n, a number or a "string" without \\, $ or `'
            )
        if (option in HOST_FILE_OPTIONS or "DTB" in option) and value not in ("n", '""'):
            raise ManifestError(
                f"{where}:{n}: {option} builds host files into the kernel: testcases may not set it"
            )
        string = value[1:-1] if value.startswith('"') else ""
        if string.startswith("/") or ".." in string:
            raise ManifestError(
                f"{where}:{n}: {option} may not be an absolute path or contain '..'"
            )
