"""A job's state once validated: the request, the range as a graph, what is known so far."""

from dataclasses import dataclass

from kbisect.contract import Mode, ValidatedJob
from kbisect.decide.strategy import Graph, Search
from kbisect.workflows.bisect_types import BisectRequest


@dataclass
class JobState:
    req: BisectRequest
    job: ValidatedJob
    mode: Mode
    search: Search
    subjects: dict[str, str]  # grows as builds report subjects of large ranges

    @classmethod
    def of(cls, req: BisectRequest, job: ValidatedJob) -> "JobState":
        graph, subjects = range_of(job)
        return cls(
            req=req,
            job=job,
            mode=Mode(req.mode),
            search=Search(graph=graph, new=job.new, old=set(job.old)),
            subjects={**job.old_subjects, **subjects},
        )

    def index(self, commit: str) -> int:
        """Place in the range's history, oldest first; -1 outside it (the old endpoint)."""
        order = self.search.graph.order
        return len(order) - 1 - order.index(commit) if commit in order else -1


def range_of(job: ValidatedJob) -> tuple[Graph, dict[str, str]]:
    """The job's commit graph and the subjects it carries."""
    parents = {
        h: tuple(job.order[i] for i in idx)
        for h, idx in zip(job.order, job.parent_index, strict=True)
    }
    return Graph(parents=parents, order=tuple(job.order)), dict(job.subjects)
