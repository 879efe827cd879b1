"""Whose fault a failed make is: the commit's or the host's.

Positive classification: only a compiler, assembler or linker error in the tree makes a
KernelBuildError (the commit is skipped and the failure cached). Anything else, such as
a make usage error, a signal, a missing tool or a full disk, is an InfraError: retried,
never cached, so a rerun after the host is fixed builds.
"""

import re
import signal

from kbisect.errors import DiskFullError, InfraError, KbisectError, KernelBuildError

# Headers the host provides (libc6-dev, libssl-dev, libelf-dev, zlib1g-dev, a gcc plugin
# package...), never the tree: one missing is the host's. Bare names the kernel also has
# as local headers (string.h, ctype.h in arch/x86/boot) are left out.
SYSTEM_HEADER = (
    r"(?:sys|bits|gnu|netinet|arpa|openssl|elfutils|ncursesw?|python3[\d.]*)/\S+|"
    r"(?:gelf|libelf|elf|zlib|zstd|lz4|lzma|ncurses|curses|gmp|mpc|mpfr|gcc-plugin|dwarf|"
    r"libdw|stdio|stdlib|unistd|fcntl|getopt|pthread|dirent|dlfcn|poll|termios|syslog|pwd|"
    r"grp|libgen|fnmatch|glob|endian|byteswap|malloc|search|setjmp|wchar|locale|regex|"
    r"iconv|limits|inttypes)\.h"
)
# Checked first: lines that blame the host even when they look like a compiler error.
INFRA_PATTERNS = (
    re.compile(r"No space left on device|Disk quota exceeded"),
    re.compile(r"(command not found|: not found)$"),
    re.compile(rf"fatal error: (?:{SYSTEM_HEADER}): No such file"),
    re.compile(r"Cannot allocate memory|Killed signal terminated program|internal compiler error"),
    re.compile(r"Segmentation fault|Bus error|Illegal instruction"),
    re.compile(r"Permission denied|Read-only file system|Input/output error"),
    re.compile(r"Too many open files|Stale file handle"),
    re.compile(r"symbol lookup error|error while loading shared libraries"),
    # An assembler older than the tree wants (the kernel's own check), or than the
    # compiler's output needs (gcc's .s, a temporary file or a pipe with -pipe).
    re.compile(r"^\*\*\* (Assembler|Linker|Compiler) is too old"),
    re.compile(
        r"^(\S*/cc\w+\.s|\{standard input\}):\d+: Error: (no such instruction|unknown pseudo)"
    ),
)
# A compiler, assembler or linker error about the tree's own files.
TREE_PATTERNS = (
    re.compile(r"^[^\s:]+:\d+:(\d+:)? (fatal )?error: "),  # gcc/clang: file.c:12:3: error:
    re.compile(r"^[^\s:]+:\d+: Error: "),  # gas: file.S:12: Error:
    re.compile(r"undefined reference to |multiple definition of "),  # ld
    re.compile(r"^\S*ld(\.\w+)?: error: "),  # lld
    re.compile(r"^ERROR: modpost: "),
    re.compile(r"^\S*Kconfig\S*:\d+: syntax error"),
)
# gcc's quote of the source under an error ("  12 |   x = 1;", "     |   ^"): the tree's
# text, which may say anything, so never evidence against the host.
SOURCE_QUOTE = re.compile(r"^\s*\d*\s*\|")
MAX_LINE = 500  # of an error line kept for a message: a build can print anything


def is_tree_error(line: str) -> bool:
    return any(p.search(line) for p in TREE_PATTERNS) and not is_infra(line)


def is_infra(line: str) -> bool:
    return any(p.search(line) for p in INFRA_PATTERNS)


class TreeBuildError(KernelBuildError):
    """A KernelBuildError with the compiler or linker line that proves it (for the cache)."""

    def __init__(self, evidence: str) -> None:
        super().__init__(f"kernel does not build: {evidence}")
        self.evidence = evidence


class FailureScan:
    """Watches a make's output, line by line, for the evidence of whose fault it is."""

    def __init__(self) -> None:
        self.tree_error = ""  # the first compiler/linker error
        self.infra = ""  # the first line that blames the host
        self.last = ""  # the last line, for a failure nothing explains

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")[:MAX_LINE]
        if not line.strip():
            return
        self.last = line.strip()
        if SOURCE_QUOTE.match(line):
            return
        if not self.infra and is_infra(line):
            self.infra = self.last
        elif not self.tree_error and is_tree_error(line):
            self.tree_error = self.last

    def error(self, returncode: int, log_name: str) -> KbisectError:
        """The exception for a make that exited with returncode (not 0)."""
        if self.infra:
            kind = DiskFullError if re.search(r"space|quota", self.infra) else InfraError
            return kind(f"build failed for a host reason ({self.infra}): see {log_name}")
        if returncode < 0:
            sig = signal.Signals(-returncode).name if -returncode in _SIGNALS else -returncode
            return InfraError(
                f"make was killed by {sig} (out of memory? stopped?): retried; see {log_name}"
            )
        if self.tree_error:
            return TreeBuildError(self.tree_error)
        return InfraError(
            f"make failed (exit {returncode}) without a compiler or linker error, so not "
            f"the commit's fault: {self.last or 'no output'}; see {log_name}"
        )


_SIGNALS = {s.value for s in signal.Signals}
