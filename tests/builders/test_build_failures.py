"""A failed make is the commit's fault only on a compiler, assembler or linker error in
the tree; everything else is the host's, retried and never cached."""

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from kbisect.builders import artifact_cache
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.errors import InfraError, KernelBuildError
from tests.builders.test_kernel_build import MAKEFILE, SPEC, _commit, _make_count, tree

__all__ = ["tree"]  # the fixture, shared

REAL_MAKE = shutil.which("make") or "/usr/bin/make"
BROKEN_MAKES = {
    "jobs-zero": f'exec {REAL_MAKE} -j0 "$@"',
    "unknown-option": f'exec {REAL_MAKE} --no-such-option "$@"',
    "killed": "echo '  CC init/main.o'; kill -KILL $$",
    "terminated": "echo 'kernel/sys.c:1:2: error: x'; kill -TERM $$",  # even after an error
}


@pytest.mark.parametrize("fault", sorted(BROKEN_MAKES))
def test_a_broken_make_is_infra_and_a_rerun_builds(
    fault: str,
    tree: tuple[Path, dict[str, str]],
    cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo, c = tree
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "make"
    fake.write_text(f"#!/bin/sh\n{BROKEN_MAKES[fault]}\n")
    fake.chmod(0o755)
    host_path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{bin_dir}:{host_path}")
    with caplog.at_level(logging.INFO, logger="kbisect.builders.kernel_build"):
        with pytest.raises(InfraError) as err:
            KernelBuilder().build(repo, c["good"], SPEC)
    assert not isinstance(err.value, KernelBuildError)
    assert c["good"][:12] in caplog.text and "host problem" in caplog.text
    monkeypatch.setenv("PATH", host_path)  # the host is fixed
    art = KernelBuilder().build(repo, c["good"], SPEC)
    assert not art.cached and Path(art.kernel).exists() and _make_count(cache) == 1


@pytest.mark.parametrize("name", ["my cache", "cache:1", "a$b", "c#d"])
def test_a_cache_path_make_cannot_take_is_refused_before_building(
    name: str, tree: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, c = tree
    bad = tmp_path / name
    monkeypatch.setenv("KBISECT_CACHE", str(bad))
    with pytest.raises(InfraError, match="KBISECT_CACHE") as err:
        KernelBuilder().build(repo, c["good"], SPEC)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)
    assert not (bad / "slots").exists()  # refused before a worktree or make


def test_a_link_error_is_a_kernel_build_error(
    tree: tuple[Path, dict[str, str]], cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo, _ = tree
    link = MAKEFILE.replace(
        "\t$(CC) -c -o $(O)/main.o main.c",
        "\t$(CC) -o $(O)/main.o main.c",
    )
    broken = _commit(
        repo,
        {"Makefile": link, "main.c": "int f(void);\nint main(void)\n{\n\treturn f();\n}\n"},
        "link error",
    )
    with caplog.at_level(logging.INFO, logger="kbisect.builders.kernel_build"):
        with pytest.raises(KernelBuildError, match="undefined reference to"):
            KernelBuilder().build(repo, broken, SPEC)
    assert broken[:12] in caplog.text and "does not build" in caplog.text
    with pytest.raises(KernelBuildError):  # cached: deterministic
        KernelBuilder().build(repo, broken, SPEC)
    assert _make_count(cache) == 1


def test_a_failure_cached_without_evidence_is_rebuilt(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    """Entries from before the positive classification may be host failures: not trusted."""
    repo, c = tree
    art = KernelBuilder().build(repo, c["good"], SPEC)
    adir = Path(art.kernel).parent
    (adir / "meta.json").write_text(
        json.dumps(
            {
                "status": "failed",
                "error": "kernel does not build: make: the '-j' option requires a positive "
                "integer argument",
                "build_log": str(adir / "build.log"),
            }
        )
    )
    again = KernelBuilder().build(repo, c["good"], SPEC)
    assert not again.cached and _make_count(cache) == 2


def test_a_huge_compiler_message_gives_a_short_one(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, _ = tree
    noisy = MAKEFILE.replace(
        "\techo built",
        "\t@python3 -c \"print('main.c:1:2: error: ' + 'x' * 3000000)\"; false\n\techo built",
    )
    broken = _commit(repo, {"Makefile": noisy}, "huge error line")
    with pytest.raises(KernelBuildError) as err:
        KernelBuilder().build(repo, broken, SPEC)
    assert len(str(err.value)) < 1000
    meta = artifact_cache.entry_dir(*_keys(repo, broken)) / "meta.json"
    assert meta.stat().st_size < 10_000


def _keys(repo: Path, commit: str) -> tuple[str, str]:
    from kbisect.builders import kconfig
    from kbisect.builders.kernel_build import compiler_version
    from kbisect.infra.git import Git

    return Git(repo).tree_of(commit), kconfig.config_hash(SPEC, compiler_version())


def test_a_rebuild_does_not_rewrite_the_log_under_a_reader(
    tree: tuple[Path, dict[str, str]], cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs are written under unique names and renamed: a reader (or another build of the
    same entry) never sees one truncated and rewritten."""
    repo, c = tree
    art = KernelBuilder().build(repo, c["good"], SPEC)
    adir = Path(art.kernel).parent
    (adir / "meta.json").unlink()  # the next build rebuilds it
    first = Path(art.build_log).read_text()
    seen: list[tuple[str, str]] = []
    with open(art.build_log) as reader:

        def look(step: str) -> None:
            if step == "compiling":  # mid-build: the old log is still whole, both ways
                reader.seek(0)
                seen.append((reader.read(), Path(art.build_log).read_text()))

        KernelBuilder().build(repo, c["good"], SPEC, look)
    assert "tinyconfig" in first and seen == [(first, first)]
    second = Path(art.build_log).read_text()  # the rebuild's (its slot kept the .config)
    (adir / "meta.json").unlink()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text("#!/bin/sh\nkill -KILL $$\n")
    (bin_dir / "make").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(InfraError, match=r"host-failure\.log"):
        KernelBuilder().build(repo, c["good"], SPEC)
    assert Path(art.build_log).read_text() == second  # the host's failure is logged apart
    assert "kill" not in first and (adir / "host-failure.log").exists()
    assert not [p.name for p in adir.iterdir() if p.name.endswith(".tmp")]


def test_a_make_that_leaves_no_image_is_infra(
    tree: tuple[Path, dict[str, str]], cache: Path
) -> None:
    repo, _ = tree
    silent = MAKEFILE.replace(
        "\tmkdir -p $(O)/arch/x86/boot && cp $(O)/main.o $(O)/arch/x86/boot/bzImage", "\t@true"
    )
    commit = _commit(repo, {"Makefile": silent}, "no image")
    for _ in range(2):
        with pytest.raises(InfraError, match="left no"):
            KernelBuilder().build(repo, commit, SPEC)
    assert _make_count(cache) == 2  # not cached
