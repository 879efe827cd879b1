"""The decide local activity: a job's next decision from its record (kbisect.decide).

Run by the workflow worker itself, its answer written into the job's history; the
decider keeps each job's engine between questions, a cache the record rebuilds."""

from temporalio import activity

from kbisect.contract import DECIDE
from kbisect.decide.decider import Decider
from kbisect.decide.plan import Plan
from kbisect.decide.record import Record

DECIDER = Decider()
# Decisions hold the interpreter while they run: two threads let a second job's question
# wait behind one, never behind a whole queue.
DECIDE_THREADS = 2


@activity.defn(name=DECIDE)
def decide(record: Record) -> Plan:
    return DECIDER.decide(record)
