"""Every JSON kbisect gives (the CLI's --json, the web's JSON, the series store on disk) is
strict: json.dumps writes a guest's NaN or infinity as NaN and Infinity, which are not
JSON and which no reader but Python's takes."""

import math
import re
from pathlib import Path

from kbisect.contract import strict_json

ROOT = Path(__file__).resolve().parents[2]
# Where results leave kbisect as JSON; what json.dumps still writes elsewhere (the door's
# state, a service's pid file, build metadata) carries no guest's figure
OUTPUTS = [*(ROOT / "kbisect/cli").glob("*.py"), ROOT / "kbisect/doors/web/app.py"]
OUTPUTS.append(ROOT / "workers/series_store.py")


def test_a_figure_that_is_not_finite_is_null() -> None:
    data = {"a": [1.5, math.nan, (math.inf, -math.inf)], "b": {"c": math.nan, "d": "nan"}}
    assert strict_json(data) == '{"a": [1.5, null, [null, null]], "b": {"c": null, "d": "nan"}}'


def test_every_json_output_is_strict() -> None:
    loose = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in OUTPUTS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bjson\.dumps?\(", line)
    ]
    assert loose == [], "write these with contract.strict_json"
