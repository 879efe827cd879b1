"""The engine's state in the job's words: what the steps show of each commit's boots."""

from kbisect.contract import Mode
from kbisect.decide.engine_report import Seen, endpoint_step, measured
from kbisect.decide.record import Event, Kind, Record, Setup
from kbisect.decide.strategy import State
from kbisect.decide.terms import EngineConfig
from kbisect.workflows.bisect_types import StepSource
from tests.decide.simulated import linear


def test_each_boot_is_read_from_the_record_numbered_as_the_job_counted_it() -> None:
    # The workflow keeps only what the record does not (seconds, why a commit has no
    # score); a commit's boots, hosts and numbers are the record's BOOT events, in order.
    setup = Setup("job", ["new", "mid", "old"], [[1], [2], []], "new", ["old"], EngineConfig())
    record = Record(setup)
    record.events += [
        Event(Kind.WANTS),
        Event(Kind.BOOT, commit="old", samples=[10.0, 12.0, 11.0], host="a"),
        Event(Kind.BOOT, commit="new", samples=[20.0], host="b"),
        Event(Kind.FAILED, commit="mid"),
        Event(Kind.MARK, commit="mid", state=State.NEW),
        Event(Kind.BOOT, commit="old", samples=[13.0], host="b", beside=True),
    ]
    seen = {
        "old": Seen(build_seconds=60.0, test_seconds=9.0),
        "new": Seen(),
        "mid": Seen(failed=StepSource.BUILD_FAILED, failure="no rule"),
    }
    found = measured(record, seen)
    old, new, mid = found["old"], found["new"], found["mid"]
    assert (old.raw, old.hosts, old.boot_numbers) == ([11.0, 13.0], ["a", "b"], [1, 3])
    assert old.repetitions == [[10.0, 12.0, 11.0], [13.0]]
    assert (old.build_seconds, old.test_seconds) == (60.0, 9.0)
    assert (new.raw, new.boot_numbers) == ([20.0], [2])
    assert (mid.raw, mid.failed, mid.failure) == ([], StepSource.BUILD_FAILED, "no rule")
    assert set(found) == set(seen) and seen["old"] == Seen(build_seconds=60.0, test_seconds=9.0)


def test_a_boot_set_aside_as_wild_is_shown_in_its_step_and_said() -> None:
    setup = Setup.of("t", linear(8), "c8", ["root"], EngineConfig(), flaky=False)
    record = Record(
        setup, [Event(Kind.BOOT, commit="root", samples=[float(v)]) for v in (97, 2604, 98)]
    )
    found = measured(record, {}, {"root": [1]})
    assert found["root"].set_aside == [2]  # the job's boot 2
    step = endpoint_step(True, "root", "", Mode.REGRESSION, found["root"])
    assert step.set_aside == [2] and step.scores == [97, 2604, 98]
    assert step.note.startswith("boot(s) 2 set aside")
