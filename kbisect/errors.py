"""Typed errors. The type decides what a failure means for a bisection step.

UserError: bad input; the message is one line that says what to do.
CannotTestError: a UserError about one kernel: its boots cannot test, the job goes on.
KernelBuildError / BootError: the commit is broken, so the step is SKIP.
InfraError: the host or a tool is broken; retried, never turned into a verdict.
"""


class KbisectError(Exception):
    """Base of every error kbisect raises on purpose."""


class UserError(KbisectError):
    """Bad input (unknown revision, testcase, malformed manifest...)."""


class UnknownRevisionError(UserError):
    pass


class UnknownTestcaseError(UserError):
    pass


class ManifestError(UserError):
    pass


class CannotTestError(UserError):
    """This kernel lacks what the testcase needs (a module, a way to the host userland):
    one line before a `try`; in a job, that kernel's boots "cannot test" (a sweep's cell
    gives up on it, a bisection skips the commit, and fails on an endpoint). Found in a
    boot (the script's 125, a module the guest could not load): its console."""

    def __init__(self, message: str, console_path: str = "") -> None:
        super().__init__(message)
        self.console_path = console_path


class KernelBuildError(KbisectError):
    """This commit does not compile with this config."""

    def __init__(self, message: str, log_path: str = "") -> None:
        super().__init__(message)
        self.log_path = log_path


class BootError(KbisectError):
    """The kernel did not come up far enough to run the testcase."""

    def __init__(self, message: str, console_path: str = "") -> None:
        super().__init__(message)
        self.console_path = console_path


class InfraError(KbisectError):
    """A tool, the disk or the host failed: retry, never a verdict."""


class DiskFullError(InfraError):
    pass


class TestcaseFailedError(KbisectError):
    """The kernel booted but the testcase script failed (its exit status is not 0)."""

    __test__ = False  # not a pytest test class

    def __init__(self, message: str, console_path: str = "") -> None:
        super().__init__(message)
        self.console_path = console_path
