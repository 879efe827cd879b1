"""Which files a build compiled (from Kbuild's .cmd files) and which changes count."""

from pathlib import Path

from kbisect.builders.sources import compiled_sources, relevant

CMD = """\
cmd_drivers/nvme/host/core.o := gcc -c -o drivers/nvme/host/core.o ../src/drivers/nvme/host/core.c

source_drivers/nvme/host/core.o := ../src/drivers/nvme/host/core.c

deps_drivers/nvme/host/core.o := \\
    $(wildcard include/config/BLK_DEV_ZONED) \\
  ../src/include/linux/compiler-version.h \\
  include/generated/autoconf.h \\
  /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h \\
  ../src/arch/x86/include/asm/../../../../include/linux/types.h \\

drivers/nvme/host/core.o: $(deps_drivers/nvme/host/core.o)
"""


def test_the_sources_of_an_out_of_tree_build(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "build"
    (out / "drivers/nvme/host").mkdir(parents=True)
    (out / "drivers/nvme/host/.core.o.cmd").write_text(CMD)
    (out / "drivers/nvme/host/core.o").write_text("not a cmd file ../src/nope.c")
    assert compiled_sources(out, src) == [
        "drivers/nvme/host/core.c",
        "include/linux/compiler-version.h",
        "include/linux/types.h",
    ]


def test_build_machinery_always_counts() -> None:
    compiled = {"kernel/fork.c"}
    assert relevant("kernel/fork.c", compiled)
    for path in (
        "Makefile",
        "drivers/nvme/host/Kconfig",
        "arch/x86/Kbuild",
        "scripts/link-vmlinux.sh",
        "tools/objtool/check.c",
        "arch/x86/configs/tiny.config",
        "kernel/configs/tiny.config",
        "arch/x86/kernel/vmlinux.lds.S",
        "usr/gen_initramfs.sh",
    ):
        assert relevant(path, compiled), path
    for path in ("Documentation/block/x.rst", "sound/pci/au88x0/au88x0.c", "kernel/exit.c"):
        assert not relevant(path, compiled), path
