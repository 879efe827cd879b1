"""Config: `make tinyconfig`, then the base and the testcase's fragments, then olddefconfig."""

import dataclasses
import hashlib
from pathlib import Path

from kbisect.builders import job_inputs
from kbisect.contract import EXPLAIN_ALIGNMENT
from kbisect.errors import UserError
from kbisect.infra import user_file
from kbisect.model import BuildSpec

MAX_CONFIG = 4 << 20  # a distro's .config is about 300 KiB


def base_config() -> str:
    return (Path(__file__).parent / "base.config").read_text()


def host_userland_config() -> str:
    """What a guest needs to run on the host's root filesystem (9p, overlay, tools), with
    what explain reads (diagnostics_config: SCHEDSTATS costs nothing until a boot turns it
    on), so an explain boot of a host-userland testcase needs no kernel of its own."""
    own = (Path(__file__).parent / "host_userland.config").read_text()
    return own + diagnostics_config()


def block_config() -> str:
    """What a tinyconfig kernel of a testcase with disks gets: NVMe, device-mapper,
    blktrace."""
    return (Path(__file__).parent / "block.config").read_text()


def diagnostics_config() -> str:
    """What an explain boot reads of a kernel: perf events, symbols, schedstats."""
    return (Path(__file__).parent / "diagnostics.config").read_text()


def distro_config() -> str:
    """What a build over a distro's config changes (debug info, signing keys)."""
    return (Path(__file__).parent / "distro.config").read_text()


def kcflags(spec: BuildSpec) -> list[str]:
    """make's KCFLAGS argument for the spec's compiler flags (none without flags)."""
    return [f"KCFLAGS={' '.join(spec.cflags)}"] if spec.cflags else []


def aligned(spec: BuildSpec) -> BuildSpec:
    """The build with every function aligned to EXPLAIN_ALIGNMENT bytes: gcc's flag for C
    (a 6.1 tree has no option for it), and the kernel's own option (v6.3+, also for
    assembly; a tree without it notes it missing in the build log). Built for speed: gcc
    before 14 ignores function alignment in code optimized for size (tinyconfig's)."""
    n = EXPLAIN_ALIGNMENT
    options = (
        f"CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y\nCONFIG_DEBUG_FORCE_FUNCTION_ALIGNMENT_{n}B=y\n"
    )
    return dataclasses.replace(
        spec, fragments=(*spec.fragments, options), cflags=(*spec.cflags, f"-falign-functions={n}")
    )


def fragments_for(spec: BuildSpec) -> list[str]:
    if spec.base_config:
        return [base_config(), *spec.fragments, distro_config()]
    return [base_config(), *spec.fragments]


def settings_of(fragment: str) -> str:
    """A fragment's settings, one a line: what merging it does. Its comments and blank
    lines go ("# CONFIG_X is not set" is a setting), so two testcases whose fragments
    differ only in their words share their kernels."""
    kept = []
    for line in fragment.splitlines():
        line = line.strip()
        if line.startswith("CONFIG_") or (
            line.startswith("# CONFIG_") and line.endswith(" is not set")
        ):
            kept.append(line)
    return "\n".join(kept)


def config_hash(spec: BuildSpec, compiler: str) -> str:
    """Key of the build inputs other than the tree: the user's config and the modules it
    keeps, what the fragments set (merged as merge_config.sh does, the last setting of an
    option winning: two testcases whose fragments add nothing to each other's build share
    kernels, however their settings are split or ordered), arch, target, compiler and its
    extra flags (none: the key builds without flags had before flags were keyed)."""
    h = hashlib.sha256()
    distro = (spec.base_config, " ".join(spec.modules)) if spec.base_config else ()
    merged = sorted(wanted_options(fragments_for(spec)).items())
    settings = "\n".join(f"{key}={value}" for key, value in merged)
    for part in (*distro, settings, spec.arch, spec.target, compiler, *kcflags(spec)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def wanted_options(fragments: list[str]) -> dict[str, str]:
    """CONFIG_X -> value as requested (later fragments win)."""
    wanted: dict[str, str] = {}
    for text in fragments:
        for line in settings_of(text).splitlines():
            if line.startswith("#"):  # "# CONFIG_X is not set"
                wanted[line[2:].split()[0]] = "n"
            elif "=" in line:
                key, _, value = line.partition("=")
                wanted[key] = value
    return wanted


def missing_options(fragments: list[str], resolved_config: str) -> list[str]:
    """Requested options the resolved .config does not have (unknown or unmet deps)."""
    have: dict[str, str] = {}
    for line in resolved_config.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            have[key] = value
    return [f"{k}={v}" for k, v in wanted_options(fragments).items() if have.get(k, "n") != v]


def keep_modules_modular(fragment: str, config: str) -> str:
    """A fragment over a distro's config: what the distro builds as a module (=m) stays
    one where the fragment says =y, as in the user's real kernel."""
    modular = {k for k, v in wanted_options([config]).items() if v == "m"}
    lines = []
    for line in fragment.splitlines():
        key, _, value = line.strip().partition("=")
        lines.append(f"{key}=m" if value == "y" and key in modular else line)
    return "\n".join(lines) + "\n"


def lsmod_text(modules: tuple[str, ...]) -> str:
    """An lsmod listing of these modules, for `make LSMOD=... localmodconfig`."""
    rows = "".join(f"{m} 16384 0\n" for m in modules)
    return "Module                  Size  Used by\n" + rows


CONFIG_HINT = "give a .config or /boot/config-*"


def read_config(path: str) -> str:
    """The text of a user's --config, checked to be a kernel config."""
    text = user_file.read_text(path, MAX_CONFIG, "--config", CONFIG_HINT)
    if "CONFIG_" not in text:
        raise UserError(f"--config {path}: no CONFIG_ lines: {CONFIG_HINT}")
    return text


def store_config(text: str, cache: Path) -> str:
    """A job's --config, kept by content in the cache the build hosts share; its path."""
    return job_inputs.keep(text.encode(), cache, "config")


def stored_config(path: str) -> str:
    """The text of a job's stored --config ('' for none); InfraError when this host
    cannot see it (the build hosts must share the cache)."""
    return job_inputs.read_kept(path, "--config").decode() if path else ""
