"""How the CLI writes: rich views on a terminal, plain whole lines when piped.

Results go to stdout, progress and errors to stderr. When either is not a terminal (a
log file, `| cat`, CI), every event is one line that is never wrapped or cut, as git and
kubectl do; the live views (spinner, redrawn job table) are for terminals only.
"""

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console, Group
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kbisect.reports.lines import one_line, step_line
from kbisect.workflows.bisect_types import Progress, Step


def interactive() -> bool:
    """Both stdout and stderr are terminals: live views are welcome."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def out(text: str = "") -> None:
    """A result line on stdout."""
    print(text, flush=True)


def note(text: str) -> None:
    """A progress or status line on stderr, never wrapped."""
    print(text, file=sys.stderr, flush=True)


def stderr_console() -> Console:
    return Console(stderr=True, emoji=False, highlight=False)


def stdout_console() -> Console:
    return Console(emoji=False, highlight=False)


@contextmanager
def stages(enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """Say what is happening now: a spinner on a terminal, one line per change when
    piped. Yields the function to call with each new state."""
    if not enabled:
        yield lambda _: None
        return
    if not interactive():
        last = [""]

        def line(text: str) -> None:
            if text != last[0]:
                last[0] = text
                note(one_line(text))

        yield line
        return
    with RichProgress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=None)
        yield lambda text: progress.update(task, description=text[:110])


# --- a job's progress ----------------------------------------------------------------
class EventLines:
    """A job's progress as one line per event: status changes, each finished step once,
    the commits under test."""

    def __init__(self, write: Callable[[str], None] = note) -> None:
        self.write = write
        self.steps = 0
        self.changes = 0
        self.status = ""
        self.message = ""
        self.current: list[str] = []
        self.building: set[str] = set()
        self.boots = 0

    def update(self, p: Progress) -> None:
        # A poll sees a boot once the job may have moved on: the boot of a commit that
        # is not newly under test goes before the steps and the next "testing" line.
        boot_first = not self._newly_tested(p)
        if boot_first:
            self._boot(p)
        self.finish(p.steps, p.metric)
        for change in p.changes[self.changes :]:  # the statuses since the last look, in order
            self.end(change.status, change.message)
        self.changes = len(p.changes)
        if p.status != self.status or (p.message and p.message != self.message):
            self.end(p.status, p.message)
        if p.current and p.current != self.current:
            self.write("testing " + ", ".join(c[:12] for c in p.current))
        self.current = list(p.current)
        for commit, subject in p.building.items():
            if commit not in self.building:
                self.write(one_line(building_line(commit, subject)))
        self.building = set(p.building)
        if not boot_first:
            self._boot(p)

    def end(self, status: str, message: str) -> None:
        """A status line, once: also the job's last (the one polling ended before seeing)."""
        if (status, message) != (self.status, self.message):
            self.write(one_line(f"{status}: {message}" if message else status))
            self.status, self.message = status, message

    def _newly_tested(self, p: Progress) -> bool:
        """The latest boot's commit (last_boot starts with it) is under test since this poll."""
        commit = p.last_boot.split(" ", 1)[0]
        return bool(commit) and any(
            c.startswith(commit) for c in p.current if c not in self.current
        )

    def _boot(self, p: Progress) -> None:
        if p.boots != self.boots and p.last_boot:
            self.write(f"boot {p.boots}: {p.last_boot}")
            self.boots = p.boots

    def finish(self, steps: Sequence[Step], metric: str) -> None:
        """The steps not written yet (all of them for a job that had ended)."""
        for number, step in enumerate(steps[self.steps :], self.steps + 1):
            self.write(step_line(number, step, metric))
        self.steps = max(self.steps, len(steps))


def building_line(commit: str, subject: str) -> str:
    return f"building {commit[:12]} ({subject})" if subject else f"building {commit[:12]}"


class BuildClock:
    """When each build under way was first seen: the live view shows how long it has
    run, redrawn with every refresh (not only when the job's progress changes)."""

    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self.building: dict[str, str] = {}

    def saw(self, p: Progress) -> "BuildClock":
        now = time.monotonic()
        self.since = {c: self.since.get(c, now) for c in p.building}
        self.building = dict(p.building)
        return self

    def __rich__(self) -> Text:
        now = time.monotonic()
        return Text(
            "\n".join(
                f"{building_line(c, s[:60])} {_clock(now - self.since[c])}"
                for c, s in self.building.items()
            )
        )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def progress_view(p: Progress, clock: BuildClock | None = None) -> Group:
    """The live view on a terminal: header, the table of steps, what runs now (with each
    build's time so far when a `clock` is given)."""
    header = Text.assemble(
        (p.status, "bold"),
        f"  {p.testcase} ({p.mode})  ",
        f"{p.candidates} candidates, {len(p.steps)} steps done, ~{p.steps_left} to go",
    )
    table = Table(expand=False)
    for col in ("#", "commit", "subject", "verdict", f"{p.metric} ({p.unit})", "how"):
        table.add_column(col)
    for i, s in enumerate(p.steps, 1):
        colour = {"good": "green", "bad": "red"}.get(s.verdict, "yellow")
        table.add_row(
            str(i),
            s.commit[:12],
            Text(s.subject[:48]),  # the repository's words: text, never rich markup
            f"[{colour}]{s.verdict}[/]",
            "" if s.value is None else f"{s.value:g}",
            s.source,
        )
    now = Text("testing " + ", ".join(c[:12] for c in p.current)) if p.current else Text(p.message)
    if p.last_boot:
        now.append(f"  (boot {p.boots}: {p.last_boot})")
    return Group(header, table, now, (clock or BuildClock()).saw(p))
