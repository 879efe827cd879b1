"""`kbisect testcases`: the testcase library, a broken testcase listed with its error."""

import argparse
import json

from kbisect.cli.output import out
from kbisect.settings import Settings


def cmd_testcases(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.testcases import manifest

    entries = manifest.catalog()
    if args.json:
        rows = [
            {"name": e.name, "folder": str(e.folder), "error": e.error}
            if e.manifest is None
            else {
                "name": e.name,
                "description": e.manifest.description,
                "primary": e.manifest.primary,
                "unit": e.manifest.metrics[e.manifest.primary].unit,
                "profile": e.manifest.profile,
                "repetitions": e.manifest.repetitions,
                "warmup": e.manifest.warmup,
                "metrics": {
                    name: {"unit": m.unit, "better": m.better.value, "exact": m.exact}
                    | ({"description": m.description} if m.description else {})
                    for name, m in e.manifest.metrics.items()
                },
                "folder": str(e.folder),
            }
            for e in entries
        ]
        out(json.dumps(rows, indent=2))
        return 0
    for e in entries:
        m = e.manifest
        if m is None:
            out(f"{e.name}: broken: {e.error}")
        else:
            out(f"{m.name}: {m.description} (primary: {m.primary}, profile: {m.profile})")
            metrics = (
                f"{k} ({v.unit}, {v.better.value} is better{', exact' if v.exact else ''})"
                for k, v in m.metrics.items()
            )
            out(f"  metrics: {', '.join(metrics)}")
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    tc = sub.add_parser("testcases", help="list the testcase library")
    tc.add_argument("--json", action="store_true", help="a JSON list on stdout")
    tc.set_defaults(func=cmd_testcases)
