"""What every benchmark reports with: percentiles, the date, which code was measured, and the
last step that prints the figures and writes them as JSON."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def percentiles(values: Sequence[float], qs: Sequence[float] = (0.5, 0.9, 0.99)) -> dict[str, float | None]:
    """Nearest-rank percentiles plus max and mean, rounded to 0.01."""
    if not values:
        return {**{f"p{round(q * 100):d}": None for q in qs}, "max": None, "mean": None}
    ordered = sorted(values)
    n = len(ordered)
    out: dict[str, float | None] = {}
    for q in qs:
        rank = max(1, int(np.ceil(q * n)))
        out[f"p{round(q * 100):d}"] = round(float(ordered[rank - 1]), 2)
    out["max"] = round(float(ordered[-1]), 2)
    out["mean"] = round(float(sum(ordered) / n), 2)
    return out


def finish_report(
    result: dict[str, Any], started: float, report: Callable[[dict[str, Any]], None], path: Path | None
) -> None:
    """Every benchmark's last step: total wall time, the printed report, and the JSON figures."""
    result["wall_s"] = round(time.perf_counter() - started, 1)
    report(result)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"figures written to {path}")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def code_version(repo: Path) -> dict[str, Any]:
    """Which code was measured: the commit and whether the working tree had changes (read-only git)."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args], check=False, cwd=repo, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    changed = git("status", "--porcelain", "--untracked-files=no")
    return {
        "repo": str(repo),
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "modified_files": len(changed.splitlines()),
    }


def line(label: str, text: str, width: int = 19) -> None:
    """One labelled line of a printed report."""
    print(f"{label:<{width}}{text}")
