"""What a series watch keeps, by kernel and testcase, in one JSON file per watch on the
host that runs its activities (the build host: it has the trees and apt).

Every boot of every sweep joins its kernel's figures: the previous kernel's fresh boots
in a later sweep are kept beside its first ones. Nothing is thrown away, and nothing kept
is judged again: each pair is judged on its own sweep's boots only. The sweeps are kept
by job id, so recording one twice (a retried activity) changes nothing.
"""

import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kbisect.contract import strict_json
from kbisect.errors import UserError
from kbisect.settings import Settings, private_dir
from kbisect.workflows.series_types import SeriesAlert, SeriesKernel, SeriesRecord
from kbisect.workflows.sweep_types import PairWord, SweepPair


def path(settings: Settings, watch: str) -> Path:
    return private_dir(settings.data) / "series" / f"{watch}.json"


class Kept:
    def __init__(self, file: Path) -> None:
        self.file = file
        self.data: dict[str, Any] = {"measured": [], "kernels": {}, "sweeps": {}}
        if file.exists():
            try:
                self.data = json.loads(file.read_text())
            except (OSError, ValueError) as exc:
                why = f"{file} is not a series watch's record ({exc}): move it away"
                raise UserError(why) from exc

    def last(self) -> SeriesKernel | None:
        """The newest kernel measured (or taken as the baseline)."""
        if not self.data["measured"]:
            return None
        return SeriesKernel(**self.data["kernels"][self.data["measured"][-1]]["kernel"])

    def measured(self) -> set[str]:
        return set(self.data["measured"])

    def take(self, kernel: SeriesKernel) -> None:
        """The kernel as measured: later ones are swept against it."""
        self._kernel(kernel)
        if kernel.key not in self.data["measured"]:
            self.data["measured"].append(kernel.key)

    def _kernel(self, kernel: SeriesKernel) -> dict[str, Any]:
        entry: dict[str, Any] = self.data["kernels"].setdefault(
            kernel.key, {"kernel": asdict(kernel), "boots": {}}
        )
        return entry

    def record(self, rec: SeriesRecord) -> list[SeriesAlert]:
        """The sweep's boots, by kernel and testcase; its changed pairs as alerts."""
        if rec.sweep in self.data["sweeps"]:
            return [_alert(a) for a in self.data["sweeps"][rec.sweep]["alerts"]]
        for boot in rec.result.boots:
            if boot.value is None:
                continue
            figures = self._kernel(rec.series[boot.kernel])["boots"]
            kept = {"sweep": rec.sweep, "value": boot.value, "samples": boot.samples}
            figures.setdefault(boot.testcase, []).append({**kept, "host": boot.host})
        for kernel in rec.series:
            self.take(kernel)
        alerts = alerts_of(rec)
        self.data["sweeps"][rec.sweep] = {
            "kernels": [k.key for k in rec.series],
            "alerts": [asdict(a) for a in alerts],
        }
        return alerts

    def kept(self) -> dict[str, dict[str, int]]:
        """Boots kept by kernel (its name) and testcase."""
        return {
            k["kernel"]["name"]: {tc: len(b) for tc, b in k["boots"].items()}
            for k in self.data["kernels"].values()
        }

    def save(self) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".series-")
        with os.fdopen(fd, "w") as f:
            f.write(strict_json(self.data, indent=1))
        os.replace(tmp, self.file)  # a crash leaves the older whole file


def alerts_of(rec: SeriesRecord) -> list[SeriesAlert]:
    """A changed pair is an alert; so is a pair that could not decide (silence would read
    as all clear), under a key of its own (ending /undecided)."""
    alerts = []
    for pair in rec.result.pairs:
        if pair.verdict == PairWord.SAME:
            continue
        old, new = rec.series[pair.old], rec.series[pair.new]
        key = "/".join([rec.watch, old.key, new.key, pair.testcase, pair.metric])
        key += "/undecided" * (pair.verdict == PairWord.CANNOT_TELL)
        alerts.append(SeriesAlert(key, rec.watch, rec.sweep, old.name, new.name, pair))
    return alerts


def _alert(raw: dict[str, Any]) -> SeriesAlert:
    return SeriesAlert(**{**raw, "pair": SweepPair(**raw["pair"])})
