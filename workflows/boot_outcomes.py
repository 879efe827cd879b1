"""Each boot's outcome given to the engine: its samples, host and number go into the job's
record, and are kept there alone; what the steps show besides (seconds, the last test's
other metrics, why a commit has no score, a bad boot's console) is kept here, per commit.

Workflow code only.
"""

from collections.abc import Callable

from kbisect import evidence
from kbisect.contract import BuildResult, TestResult, TestStatus
from kbisect.decide import engine_report
from kbisect.decide.endpoints import endpoint_problem
from kbisect.decide.engine_report import Measured, Seen
from kbisect.decide.evidence import Boot
from kbisect.workflows.activity_calls import JobFailed
from kbisect.workflows.bisect_types import Progress, StepSource
from kbisect.workflows.job_decisions import JobDecisions
from kbisect.workflows.job_state import JobState


class BootOutcomes:
    def __init__(
        self, state: JobState, d: JobDecisions, progress: Progress, refresh: Callable[[], None]
    ) -> None:
        self._state, self._d, self._progress, self._refresh = state, d, progress, refresh
        self.seen: dict[str, Seen] = {}
        self._marked_meanwhile: set[str] = set()  # by a person while under test
        self._kept: list[str] = []  # booted after a person marked them: a step each to add

    def show(self, commit: str, number: int, test: TestResult, what: str = "") -> None:
        """A boot in the job's progress: its commit, number and score (`what`: a kernel
        the search did not ask for, e.g. the verification's)."""
        job = self._state.job
        said = (
            (f"bad ({test.bad})" if test.bad else "good")
            if job.pass_fail
            else f"{job.primary} {engine_report.boot_value(test.samples_of(job.primary)):g}"
        )
        self._progress.boots += 1
        self._progress.last_boot = f"{commit[:12]} boot {number}: {said}{what}"
        self._refresh()

    def measured(self) -> dict[str, Measured]:
        """Each commit seen, with its boots as the record has them."""
        return engine_report.measured(self._d.record, self.seen, self._d.plan.set_aside)

    def marked(self, commit: str) -> None:
        """A person marked `commit`: a boot of it still under test gets a step of its own."""
        self._marked_meanwhile.add(commit)

    def kept(self) -> list[str]:
        """The commits booted after a person marked them since the last call."""
        kept, self._kept = self._kept, []
        return kept

    def take(
        self, commit: str, build: BuildResult, test: TestResult | None, beside: bool = False
    ) -> str | None:
        """A boot's outcome given to the engine (`beside`: the boot taken just before this
        one ran at the same moment, a duet). The VM host that ran it (None: none ran)."""
        state, d = self._state, self._d
        m = self.seen.setdefault(commit, Seen())
        m.build_seconds = build.seconds
        log = build.artifact.build_log if build.artifact else build.log
        m.build_log = evidence.build_log_of(log)
        m.fixups = list(build.fixups)
        if commit in (d.old_end, d.new_end):
            word = state.mode.old_word if commit == d.old_end else state.mode.new_word
            if problem := endpoint_problem(word, commit, build, test):
                raise JobFailed(problem)
        if test is None or test.status != TestStatus.OK:
            m.failed = StepSource(test.status) if test else StepSource.BUILD_FAILED
            m.failure = test.error if test else build.error
            m.failed_run = evidence.run_folder(test.console) if test else ""
            d.failed(commit)
            return test.host if test else None
        samples = test.samples_of(state.job.primary)
        m.last, m.test_seconds = test, m.test_seconds + test.seconds
        if test.bad and m.bad is None:
            m.bad = test
        exact = state.job.pass_fail and not state.job.flaky
        run = evidence.run_folder(test.console)
        d.boot(commit, Boot(samples, test.host, exact=exact, beside=beside), run)
        # the record's k-th boot is the job's boot k (engine_report.measured)
        self.show(commit, d.boots_of(commit), test)
        if commit in self._marked_meanwhile:  # its step once the engine has the boot
            self._marked_meanwhile.discard(commit)
            self._kept.append(commit)
        return test.host
