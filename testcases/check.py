"""`kbisect testcase check`: is a testcase ready to bisect with? Pure checks over a run.

The manifest and config fragment are checked when they load; this adds what only a boot
shows: every declared metric reported, an exact metric really the same in each
repetition.
"""

from dataclasses import dataclass, field

from kbisect.errors import InfraError
from kbisect.infra.initramfs import find_tool
from kbisect.model import Score
from kbisect.testcases.manifest import Manifest
from kbisect.words import plural


@dataclass
class CheckReport:
    testcase: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_host(manifest: Manifest) -> CheckReport:
    """What can be checked without a kernel: the manifest loaded; its tools are here."""
    report = CheckReport(manifest.name)
    for tool in manifest.tools:
        try:
            find_tool(tool)
        except InfraError as exc:
            report.problems.append(str(exc))
    report.notes.append(
        f"manifest {manifest.folder / 'manifest.toml'}: {plural(len(manifest.metrics), 'metric')}"
        f", primary {manifest.primary}, {plural(len(manifest.disks), 'disk')}, "
        f"profile {manifest.profile}"
    )
    return report


def check_score(
    manifest: Manifest, score: Score, report: CheckReport, bad: str = ""
) -> CheckReport:
    """What one boot's score says about the testcase; `bad`: a pass/fail testcase's bad
    boot (a verdict on the kernel, not a fault of the testcase: its other metrics may
    not have been reported)."""
    if manifest.pass_fail:
        report.notes.append(f"verdict: {f'bad ({bad})' if bad else 'good'}")
        if bad:
            return report
    for name in manifest.metrics:
        if name not in score.metrics:
            report.problems.append(
                f"metric {name!r} is declared but the guest script never reported it: "
                f"call kb_metric REP {name} VALUE, or remove [metrics.{name}]"
            )
    for name, metric in score.metrics.items():
        if manifest.metrics[name].exact and len(set(metric.samples)) > 1:
            seen = " ".join(f"{v:g}" for v in metric.samples)
            report.problems.append(
                f"metric {name!r} is declared exact but its repetitions differ ({seen}): "
                "remove 'exact = true' (it is a timing)"
            )
    return report
