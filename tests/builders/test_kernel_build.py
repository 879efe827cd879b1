"""The builder's logic over a tiny stand-in kernel tree: real git, make and gcc, fake Kbuild."""

import contextlib
import hashlib
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbisect.builders import artifact_cache, kconfig, kernel_build
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.builders.sources import inert_commits, read_sources
from kbisect.errors import DiskFullError, InfraError, KernelBuildError
from kbisect.infra import host_lock
from kbisect.infra.git import Git
from kbisect.model import BuildSpec
from tests.conftest import git

# The kernel targets kbisect calls, acted out: tinyconfig, olddefconfig, bzImage.
MAKEFILE = """\
tinyconfig:
\techo 'CONFIG_TINY=y' > $(O)/.config
\techo configured >> $(O)/../config-count
olddefconfig:
\t@true
bzImage:
\techo built >> $(O)/../make-count
\techo '$(KCFLAGS)' > $(O)/kcflags
\t$(CC) -c -o $(O)/main.o main.c
\techo 'deps_main.o := $(CURDIR)/main.c $$(wildcard include/config/X) /usr/include/stdio.h' \
> $(O)/.main.o.cmd
\tmkdir -p $(O)/arch/x86/boot && cp $(O)/main.o $(O)/arch/x86/boot/bzImage
\techo 'ffffffff81000000 T main_x' > $(O)/System.map
"""
MERGE_CONFIG = """#!/bin/sh
# merge_config.sh -m -O OUT BASE FRAGMENTS...: append the fragments
shift 3; base=$1; shift; cat "$@" >> "$base"
"""
SPEC = BuildSpec(fragments=("CONFIG_BLK_DEV_NVME=y\n",))


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def tree(tmp_path: Path, cache: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "kernel"
    repo.mkdir()
    git(repo, "init", "-q")
    merge = repo / "scripts/kconfig/merge_config.sh"
    merge.parent.mkdir(parents=True)
    merge.write_text(MERGE_CONFIG)
    merge.chmod(merge.stat().st_mode | stat.S_IXUSR)
    commits = {
        "good": _commit(repo, {"Makefile": MAKEFILE, "main.c": "int main_x;\n"}, "good"),
        "broken": _commit(repo, {"main.c": "int main_x = ;\n"}, "broken"),
        "fixed": _commit(repo, {"main.c": "int main_x = 1;\n"}, "fixed"),
    }
    return repo, commits


def _make_count(cache: Path, what: str = "make-count") -> int:
    counts = list(cache.glob(f"slots/*/{what}"))
    return sum(len(p.read_text().splitlines()) for p in counts)


def test_a_slot_keeps_its_config_until_the_build_machinery_changes(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, c = tree
    KernelBuilder().build(repo, c["good"], SPEC)
    fixed = KernelBuilder().build(repo, c["fixed"], SPEC)
    assert _make_count(cache, "config-count") == 1  # main.c only: the .config is the same
    assert ".config kept from the slot's build of " + c["good"] in Path(fixed.build_log).read_text()
    assert "CONFIG_BLK_DEV_NVME=y" in Path(fixed.config).read_text()
    kconf = _commit(repo, {"drivers/Kconfig": "config X\n\tbool\n"}, "a Kconfig change")
    KernelBuilder().build(repo, kconf, SPEC)
    assert _make_count(cache, "config-count") == 2
    KernelBuilder().build(repo, kconf, BuildSpec(fragments=("CONFIG_X=y\n",)))
    assert _make_count(cache, "config-count") == 3  # other fragments: configured anew
    later = _commit(repo, {"main.c": "int main_x = 2;\n"}, "later")
    KernelBuilder().build(repo, later, BuildSpec(fragments=("CONFIG_X=y\n",)))
    assert _make_count(cache, "config-count") == 3


def test_same_tree_and_config_build_once(tree: tuple[Path, dict[str, str]], cache: Path) -> None:
    repo, c = tree
    first = KernelBuilder().build(repo, c["good"], SPEC)
    assert not first.cached and Path(first.kernel).exists()
    assert "CONFIG_BLK_DEV_NVME=y" in Path(first.config).read_text()
    again = KernelBuilder().build(repo, c["good"], SPEC)
    assert again.cached and again.kernel == first.kernel
    assert _make_count(cache) == 1
    other = KernelBuilder().build(repo, c["good"], BuildSpec(fragments=("CONFIG_X=y\n",)))
    assert not other.cached and other.config_hash != first.config_hash


def test_an_aligned_build_passes_its_flags_to_make_and_has_a_key_of_its_own(
    tree: tuple[Path, dict[str, str]], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`explain --alignment`'s kernels: the spec's compiler flags reach make as KCFLAGS
    (the environment's own is scrubbed) and are in the artifact's key, so the aligned
    and the plain kernel of one commit are two cache entries."""

    repo, c = tree
    monkeypatch.setenv("KCFLAGS", "-O0")  # a user's: never reaches make
    plain = KernelBuilder().build(repo, c["good"], SPEC)
    assert (Path(plain.build_log).parent / "config").exists()
    slot = next(cache.glob("slots/*/build"))
    assert (slot / "kcflags").read_text().strip() == ""
    aligned = KernelBuilder().build(repo, c["good"], kconfig.aligned(SPEC))
    assert not aligned.cached and aligned.config_hash != plain.config_hash
    flags = [(p / "kcflags").read_text().strip() for p in cache.glob("slots/*/build")]
    assert "-falign-functions=64" in flags, flags
    assert "KCFLAGS=-falign-functions=64" in Path(aligned.build_log).read_text()
    # the kernel's own option is asked for too (a tree without it notes it missing)
    assert "CONFIG_DEBUG_FORCE_FUNCTION_ALIGNMENT_64B=y" in Path(aligned.config).read_text()
    # a fragment's comments and blank lines are no input: its settings are
    worded = BuildSpec(fragments=tuple(f"# why\n\n{f}  \n# more\n" for f in SPEC.fragments))
    assert kconfig.config_hash(worded, "gcc") == kconfig.config_hash(SPEC, "gcc")
    unset = BuildSpec(fragments=(*SPEC.fragments, "# CONFIG_NET is not set\n"))
    assert kconfig.config_hash(unset, "gcc") != kconfig.config_hash(SPEC, "gcc")
    # a spec without flags keeps the key it had before flags were keyed
    assert kconfig.config_hash(SPEC, "gcc") == kconfig.config_hash(
        BuildSpec(fragments=SPEC.fragments, cflags=()), "gcc"
    )
    assert KernelBuilder().build(repo, c["good"], kconfig.aligned(SPEC)).cached
    # the image's symbols are kept beside it: where the aligned functions can be seen
    assert (Path(aligned.kernel).parent / "System.map").read_text().endswith("T main_x\n")


def test_compile_error_is_a_kernel_build_error_and_is_cached(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, c = tree
    with pytest.raises(KernelBuildError) as err:
        KernelBuilder().build(repo, c["broken"], SPEC)
    assert "error" in str(err.value) and Path(err.value.log_path).exists()
    assert "main.c" in Path(err.value.log_path).read_text()
    with pytest.raises(KernelBuildError):
        KernelBuilder().build(repo, c["broken"], SPEC)
    assert _make_count(cache) == 1  # the failure was not rebuilt
    assert not KernelBuilder().build(repo, c["fixed"], SPEC).cached


def test_full_disk_during_make_is_infra_and_not_cached(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, _ = tree
    full = _commit(
        repo,
        {
            "Makefile": MAKEFILE.replace(
                "\t$(CC)", "\techo 'cc1: error: No space left on device' && false\n\t$(CC)"
            )
        },
        "full disk",
    )
    for _ in range(2):
        with pytest.raises(DiskFullError):
            KernelBuilder().build(repo, full, SPEC)
    assert _make_count(cache) == 2  # retried, not answered from the cache


def test_missing_tool_is_infra(
    tree: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, c = tree
    real_which = kernel_build.shutil.which
    monkeypatch.setattr(
        kernel_build.shutil, "which", lambda t: None if t == "bison" else real_which(t)
    )
    with pytest.raises(InfraError, match="bison"):
        KernelBuilder().build(repo, c["good"], SPEC)


def test_low_disk_space_is_refused_before_building(
    tree: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, c = tree
    monkeypatch.setattr(
        kernel_build.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(10**9, 10**9, 100)
    )
    with pytest.raises(DiskFullError, match="free"):
        KernelBuilder().build(repo, c["good"], SPEC)


def test_switching_commits_reuses_the_worktree(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, c = tree
    KernelBuilder().build(repo, c["good"], SPEC)
    KernelBuilder().build(repo, c["fixed"], SPEC)
    (wt,) = cache.glob("slots/*/src")
    assert (wt / "main.c").read_text() == "int main_x = 1;\n"
    listed = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert listed.count("\n") == 2  # the repository itself and one slot


def test_a_build_killed_midway_is_not_trusted(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, c = tree
    KernelBuilder().build(repo, c["good"], SPEC)
    (slot,) = cache.glob("slots/*-0")
    stale = slot / "build" / "truncated.o"
    stale.write_text("half an object")
    (slot / "build-in-progress").touch()  # as a SIGKILLed build leaves it
    KernelBuilder().build(repo, c["fixed"], SPEC)
    assert not stale.exists() and not (slot / "build-in-progress").exists()


def test_concurrent_builds_take_different_slots(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    from kbisect.builders.kernel_build import _free_slot

    with _free_slot(repo := tree[0]) as first, _free_slot(repo) as second:
        assert first.index != second.index
    with _free_slot(repo) as again:
        assert again.index == 0


def test_slots_of_deleted_repositories_are_pruned(
    tree: tuple[Path, dict[str, str]], cache: Path, tmp_path: Path
) -> None:
    repo, c = tree
    KernelBuilder().build(repo, c["good"], SPEC)
    gone = tmp_path / "gone"
    shutil.copytree(repo, gone)
    KernelBuilder().build(gone, c["fixed"], SPEC)
    assert len(list(cache.glob("slots/*-0"))) == 2
    shutil.rmtree(gone)
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    new = _commit(other, {"main.c": "int main_x = 2;\n"}, "new tree: not in the cache")
    KernelBuilder().build(other, new, SPEC)  # a new slot prunes the orphan
    owners = sorted((s / "repo").read_text() for s in cache.glob("slots/*-0"))
    assert owners == sorted([str(repo.resolve()), str(other.resolve())])


def test_a_stopped_build_kills_make_at_once(tree: tuple[Path, dict[str, str]], cache: Path) -> None:
    repo, _ = tree
    slow = _commit(
        repo,
        {
            "Makefile": MAKEFILE.replace(
                "\techo built",
                '\tfor i in 1 2 3 4 5 6 7 8 9 10; do echo "  CC x$$i"; sleep 1; done\n\techo built',
            )
        },
        "slow build",
    )

    def stop_at_second_file(line: str) -> None:
        if line == "CC x2":
            raise InfraError("stopped")

    start = time.monotonic()
    with pytest.raises(InfraError, match="stopped"):
        KernelBuilder().build(repo, slow, SPEC, stop_at_second_file)
    assert time.monotonic() - start < 6  # not the 10 s the build would take
    assert _make_count(cache) == 0  # make never reached its end


def test_a_build_keeps_its_image_hash_and_the_files_it_compiled(
    tree: tuple[Path, dict[str, str]],
) -> None:
    repo, c = tree
    art = KernelBuilder().build(repo, c["fixed"], SPEC)
    assert art.image_sha256 == hashlib.sha256(Path(art.kernel).read_bytes()).hexdigest()
    assert read_sources(art.sources) == {"main.c"}  # the tree's files only
    docs = _commit(repo, {"Documentation/x.rst": "words\n"}, "docs")
    again = KernelBuilder().build(repo, docs, SPEC)  # a new tree: built, same bytes
    assert not again.cached and again.image_sha256 == art.image_sha256
    make = _commit(repo, {"Makefile": MAKEFILE + "\n"}, "build machinery")
    code = _commit(repo, {"main.c": "int main_x = 2;\n"}, "code")
    inert = inert_commits(Git(repo), [docs, make, code, c["good"]], read_sources(art.sources))
    assert inert == {docs: c["fixed"]}


# A distro config's build (--config): localmodconfig, modules, modules_install, acted out.
DISTRO_MAKEFILE = (
    MAKEFILE
    + """\
localmodconfig:
\tcp $(LSMOD) $(O)/../lsmod-seen
\tcp $(O)/.config $(O)/../config-before-merge
modules:
\techo modules >> $(O)/../modules-count
modules_install:
\tmkdir -p $(INSTALL_MOD_PATH)/lib/modules/6.1.0-test/kernel/drivers/md
\techo ko > $(INSTALL_MOD_PATH)/lib/modules/6.1.0-test/kernel/drivers/md/dm-snapshot.ko
"""
)
DISTRO = "CONFIG_MODULES=y\nCONFIG_BLK_DEV_DM=m\nCONFIG_DM_SNAPSHOT=m\n"


def test_a_distro_config_is_trimmed_to_the_testcases_modules_and_keeps_them(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, _ = tree
    commit = _commit(repo, {"Makefile": DISTRO_MAKEFILE}, "kbuild with modules")
    spec = BuildSpec(
        fragments=("CONFIG_DM_SNAPSHOT=y\nCONFIG_BLK_DEV_NVME=y\n",),
        base_config=DISTRO,
        modules=("nvme", "dm_mod", "dm_snapshot"),
    )
    art = KernelBuilder(jobs=1).build(repo, commit, spec)
    slot = next(cache.glob("slots/*"))
    assert (slot / "lsmod-seen").read_text().split()[4::3] == ["nvme", "dm_mod", "dm_snapshot"]
    assert (slot / "config-before-merge").read_text().startswith(DISTRO)  # not tinyconfig
    config = Path(art.config).read_text()
    # The fragment's =y does not make the distro's module built in; ours are applied.
    assert "CONFIG_DM_SNAPSHOT=m" in config and "CONFIG_DM_SNAPSHOT=y" not in config
    assert "CONFIG_BLK_DEV_NVME=y" in config and "# CONFIG_MODULE_SIG is not set" in config
    assert (slot / "modules-count").read_text() == "modules\n"
    assert art.modules.endswith("modules/6.1.0-test")
    assert (Path(art.modules) / "kernel/drivers/md/dm-snapshot.ko").read_text() == "ko\n"
    # Another config (or other modules) is another artifact; the same is a cache hit.
    assert KernelBuilder(jobs=1).build(repo, commit, spec).cached
    tiny = KernelBuilder(jobs=1).build(repo, commit, BuildSpec(spec.fragments))
    assert tiny.config_hash != art.config_hash and tiny.modules == ""


def test_a_build_goes_to_the_slot_already_configured_for_it(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    from kbisect.builders.kernel_build import _free_slot, _slot_order

    repo, commits = tree
    other = BuildSpec(fragments=("CONFIG_OTHER=y\n",))
    a = KernelBuilder(jobs=1).build(repo, commits["good"], SPEC)  # slot 0
    with _free_slot(repo):  # slot 0 busy: the other config goes to slot 1
        b = KernelBuilder(jobs=1).build(repo, commits["good"], other)
    assert _slot_order(repo, a.config_hash)[0] == 0
    assert _slot_order(repo, b.config_hash)[0] == 1
    configured = _make_count(cache, "config-count")
    KernelBuilder(jobs=1).build(repo, commits["fixed"], other)  # slot 1, incremental
    assert _make_count(cache, "config-count") == configured


def test_the_cache_key_changes_with_binutils(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new assembler or linker can make a commit build that did not: its version is in
    the key, as gcc's is, so a cached "does not build" is not reused across it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("gcc", "as", "ld"):
        script = bindir / tool
        script.write_text(f'#!/bin/sh\necho "{tool} 1.0"; echo "{tool} copyright"\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    first = kernel_build.compiler_version()
    assert "gcc 1.0" in first and "copyright" not in first
    for tool in ("as", "ld"):
        (bindir / tool).write_text(f'#!/bin/sh\necho "{tool} 2.0"\n')
        now = kernel_build.compiler_version()
        assert now != first and f"{tool} 2.0" in now, now
        first = now


def test_builds_use_the_deployments_shared_compile_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from kbisect.builders.kernel_build import _MakeRun
    from kbisect.errors import UserError
    from kbisect.model import BuildSpec

    spec = BuildSpec(fragments=())
    run = _MakeRun(tmp_path, tmp_path, spec, 1, None, io.StringIO(), tmp_path)  # type: ignore[arg-type]
    monkeypatch.setenv("CCACHE_REMOTE_STORAGE", "http://someone-elses/cache")
    assert run.env()["CCACHE_REMOTE_STORAGE"] == "http://someone-elses/cache"  # left alone
    monkeypatch.setenv("KBISECT_CCACHE_REMOTE", "http://127.0.0.1:9/ccache")
    assert run.env()["CCACHE_REMOTE_STORAGE"] == "http://127.0.0.1:9/ccache"
    monkeypatch.setenv("KBISECT_CCACHE_REMOTE", "s3://bucket/ccache")  # ccache 4.7 has no S3
    with pytest.raises(UserError, match="KBISECT_CCACHE_REMOTE='s3://bucket/ccache'"):
        run.env()


def test_host_userland_testcases_and_their_explain_boots_share_one_kernel() -> None:
    from kbisect.testcases import manifest
    from kbisect.testcases.explain_run import explain_spec
    from kbisect.testcases.runner import build_spec

    names = ("sched-pipe", "hackbench:pipe", "stress-ng:switch", "iperf3", "fio-read-latency")
    loaded = {name: manifest.load(name) for name in names}
    keys = {name: kconfig.config_hash(build_spec(m), "gcc") for name, m in loaded.items()}
    shared = keys["sched-pipe"]
    assert set(keys.values()) == {shared}, keys  # fio-read-latency's schedulers included
    # their explain boots run on the kernels the bisection built: nothing more to build
    assert kconfig.config_hash(explain_spec(loaded["sched-pipe"]), "gcc") == shared
    # and so does the seed's explain boot (its block stack is the host userland's too)
    seed = manifest.load("nvme-snapshot-read")
    assert kconfig.config_hash(explain_spec(seed), "gcc") == shared
    assert kconfig.config_hash(build_spec(seed), "gcc") != shared  # tinyconfig's own


def test_testcases_with_disks_share_the_block_stacks_kernel_on_tinyconfig_only() -> None:
    """disk-read boots the seed's kernels (and can be traced); the seed's key is what it
    was before the block stack (its cached kernels stay valid); on a user's config a
    testcase adds only the NVMe driver to it."""
    from kbisect.testcases import manifest
    from kbisect.testcases.runner import build_spec

    seed, disk_read = manifest.load("nvme-snapshot-read"), manifest.load("disk-read")
    key = kconfig.config_hash(build_spec(seed), "gcc")
    assert kconfig.config_hash(build_spec(disk_read), "gcc") == key
    alone = BuildSpec(fragments=(seed.config_fragment,))
    assert kconfig.config_hash(alone, "gcc") == key
    assert "CONFIG_BLK_DEV_IO_TRACE" in kconfig.wanted_options(kconfig.fragments_for(alone))
    users = build_spec(disk_read, config="CONFIG_64BIT=y\n")
    assert users.fragments == ("CONFIG_BLK_DEV_NVME=y\n",)
    assert build_spec(seed, config="CONFIG_64BIT=y\n").fragments == (seed.config_fragment,)


def test_a_kernels_key_is_what_its_fragments_set_not_how_they_are_split() -> None:
    one = BuildSpec(fragments=("CONFIG_A=y\nCONFIG_B=y\n",))
    key = kconfig.config_hash(one, "gcc")
    assert kconfig.config_hash(BuildSpec(fragments=("CONFIG_B=y\n", "CONFIG_A=y\n")), "gcc") == key
    # a setting already made adds nothing; a later one overrides an earlier one
    again = BuildSpec(fragments=(*one.fragments, "# the same\nCONFIG_A=y\n"))
    assert kconfig.config_hash(again, "gcc") == key
    undone = BuildSpec(fragments=(*one.fragments, "# CONFIG_B is not set\n"))
    assert kconfig.config_hash(undone, "gcc") != key
    assert kconfig.config_hash(BuildSpec(fragments=("CONFIG_A=y\n",)), "gcc") != key


def test_a_build_waits_for_the_host_before_it_takes_its_kernels_build_lock(
    tree: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever has the host alone (a timed guest, a test's whole host) never waits for a
    build's locks: a build that held its kernel's lock while it waited for the host would
    make a cycle with a second builder of that kernel under the host lock."""
    repo, c = tree
    taken: list[str] = []

    def recorded(name: str, real: Any) -> Any:
        @contextlib.contextmanager
        def lock(*args: Any) -> Iterator[None]:
            taken.append(name)
            with real(*args):
                yield

        return lock

    monkeypatch.setattr(host_lock, "for_build", recorded("host", host_lock.for_build))
    monkeypatch.setattr(artifact_cache, "building", recorded("kernel", artifact_cache.building))
    config = recorded("config", artifact_cache.building_config)
    monkeypatch.setattr(artifact_cache, "building_config", config)
    KernelBuilder().build(repo, c["good"], SPEC)
    assert taken == ["host", "kernel", "config"]  # from scratch: the config's lock last
    taken.clear()
    KernelBuilder().build(repo, c["fixed"], SPEC)
    assert taken == ["host", "kernel"]  # its slot is configured for it: incremental
    taken.clear()
    clone = repo.parent / "clone"
    git(repo.parent, "clone", "-q", str(repo), str(clone))
    KernelBuilder().build(clone, _commit(clone, {"main.c": "int main_x = 2;\n"}, "own"), SPEC)
    assert taken == ["host", "kernel", "config"]  # another repository's slot: from scratch
