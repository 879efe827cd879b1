"""The classification of a failed make's output, line by line."""

import pytest

from kbisect.builders.classify import FailureScan
from kbisect.errors import DiskFullError, InfraError, KernelBuildError

TREE_ERRORS = [
    "kernel/sys.c:123:9: error: 'kbisect_lab_undefined_0' undeclared (first use here)",
    "init/main.c:5:10: fatal error: linux/nope.h: No such file or directory",
    "arch/x86/entry/entry_64.S:12: Error: no such instruction: `bogus'",
    "ld: vmlinux.o: in function `start_kernel': undefined reference to `foo'",
    "ld: kernel/sys.o:(.bss+0x0): multiple definition of `x'; fs/open.o:(.bss+0x0): first",
    "ld.lld: error: undefined symbol: foo",
    'ERROR: modpost: "foo" [drivers/nvme/host/nvme.ko] undefined!',
    # A header of the tree's own that is missing: the commit's fault.
    "drivers/nvme/host/core.c:9:10: fatal error: nvme_regs.h: No such file or directory",
    "arch/x86/boot/main.c:3:10: fatal error: string.h: No such file or directory",
]
HOST_ERRORS = [
    "make: the '-j' option requires a positive integer argument",
    "make: unrecognized option '--no-such-option'",
    "make: *** No rule to make target 'include/generated/x.h', needed by 'a.o'.  Stop.",
    "gcc: internal compiler error: Segmentation fault signal terminated program cc1",
    "cc1: error: unrecognized command-line option '-mfoo'",
    "/bin/sh: 1: bc: not found",
    "ld: cannot find -lelf: No such file or directory",
    "init/main.c:1:10: fatal error: opening dependency file init/.main.o.d: Permission denied",
    "scripts/sign-file.c:25:10: fatal error: openssl/opensslv.h: No such file or directory",
    "make[2]: *** [scripts/Makefile.build:250: init/main.o] Error 1",
    # The host out of file handles, or its NFS cache gone stale under the build.
    "kernel/sys.c:2:10: fatal error: linux/mm.h: Too many open files",
    "fs/open.c:3:10: fatal error: linux/fs.h: Stale file handle",
    "ld: cannot open output file vmlinux: Too many open files in system",
    # A system header the host lacks (libc6-dev, a gcc plugin's dev package...).
    "scripts/basic/fixdep.c:96:10: fatal error: sys/types.h: No such file or directory",
    "scripts/kconfig/conf.c:7:10: fatal error: stdio.h: No such file or directory",
    "scripts/gcc-plugins/gcc-common.h:5:10: fatal error: gcc-plugin.h: No such file or directory",
    "scripts/extract-cert.c:22:10: fatal error: zlib.h: No such file or directory",
    # An assembler older than the tree or the compiler wants.
    "*** Assembler is too old.",
    "/tmp/ccAbCdEf.s:1234: Error: no such instruction: `vpdpbusd %ymm1,%ymm2,%ymm3'",
    "/tmp/cc8xYz.s:12: Error: unknown pseudo-op: `.base64'",
    "{standard input}:77: Error: no such instruction: `endbr64'",
]


@pytest.mark.parametrize("line", TREE_ERRORS)
def test_tree_errors(line: str) -> None:
    scan = FailureScan()
    for text in ("  CC init/main.o\n", line + "\n", "make[2]: *** [x] Error 1\n"):
        scan.feed(text)
    with pytest.raises(KernelBuildError):
        raise scan.error(2, "build.log")


@pytest.mark.parametrize("line", HOST_ERRORS)
def test_host_errors(line: str) -> None:
    scan = FailureScan()
    scan.feed(line + "\n")
    exc = scan.error(2, "build.log")
    assert isinstance(exc, InfraError) and "build.log" in str(exc)


def test_no_space_is_disk_full_even_beside_a_compile_error() -> None:
    scan = FailureScan()
    scan.feed("main.c:1:2: error: x\n")
    scan.feed("cc1: error: No space left on device\n")
    assert isinstance(scan.error(2, "build.log"), DiskFullError)


def test_the_source_gcc_quotes_is_not_evidence() -> None:
    scan = FailureScan()
    for line in (
        "fs/open.c:12:9: error: expected ';' before 'return'\n",
        '   12 |  pr_err("No space left on device: Permission denied")\n',
        "      |         ^\n",
    ):
        scan.feed(line)
    assert isinstance(scan.error(2, "build.log"), KernelBuildError)
