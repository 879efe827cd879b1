"""An explain job's traced boots (blktrace, one repetition each) as statistics of the
source "blktrace", compared with the rest: each disk's requests, merges and sizes, and
its latencies by phase and direction. Pure."""

from collections.abc import Mapping
from typing import Any

SOURCE = "blktrace"
PHASES = ("q2c", "d2c", "q2g", "i2d")


def _latencies(out: dict[str, float], prefix: str, found: Mapping[str, Any]) -> None:
    for phase in PHASES:
        lat = found.get(phase)
        if not lat:
            continue
        out[f"{prefix}{phase.upper()} avg ms"] = float(lat["avg_ms"])
        if lat.get("p99_ms") is not None:
            out[f"{prefix}{phase.upper()} p99 ms"] = float(lat["p99_ms"])


def trace_stats(diagnostics: Mapping[str, Any]) -> dict[str, float]:
    """A traced boot's figures (TraceResult.diagnostics) by name, each disk's device first."""
    out: dict[str, float] = {}
    for disk in (diagnostics.get("disks") or {}).values():
        dev = f"{disk['device']} "
        out[f"{dev}requests"] = float(disk.get("requests", 0))
        out[f"{dev}merges"] = float(disk.get("merges", 0))
        out[f"{dev}request size (sectors)"] = float(disk.get("avg_request_sectors", 0))
        _latencies(out, dev, disk.get("latencies") or {})
        for way, d in (disk.get("directions") or {}).items():
            requests = int(d.get("requests", 0))
            out[f"{dev}{way} requests"] = float(requests)
            if requests:
                out[f"{dev}{way} request size (sectors)"] = float(d.get("sectors", 0)) / requests
            _latencies(out, f"{dev}{way} ", {k: d.get(k) for k in ("q2c", "d2c")})
    return out


def trace_line(diagnostics: Mapping[str, Any]) -> str:
    """A traced boot in a few words: each disk's requests and their size."""
    said = [
        f"{d['device']} {d.get('requests', 0)} requests of "
        f"{float(d.get('avg_request_sectors', 0)):.0f} sectors, {d.get('merges', 0)} merges"
        for d in (diagnostics.get("disks") or {}).values()
    ]
    return "; ".join(said) or "no disk traced"
