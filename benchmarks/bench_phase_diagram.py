"""The phase diagram (``rmt phase-diagram``): the wall time of its default grid.

The goal: the default grid (widths 1-4 by softplus, tanh and relu by Huber and square loss,
24 cells of ``rmt.dmft_delta_nn`` with its defaults) in at most 20 minutes on the project's
2-core machine.  The cells run through ``rmt.run_tasks``: serially, or with
``--scheduler local`` on a local Dask cluster of one single-threaded worker per core.

The baseline, timed in the same run: one call of ``rmt.dmft_delta_nn`` for phase retrieval,
softplus/Huber, m = 2 (the benchmark of ``bench_dmft_threshold.py``).  The grid's time in
units of that call is what the grid costs in threshold searches.

Run: ``python benchmarks/bench_phase_diagram.py [--grid "width=1,2"] [--scheduler local]
[--out DIR] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile
import time

from _util import cpu_info

import rmt
from rmt.experiments.phase_diagram import parse_grid, phase_diagram

GOAL_S = 20 * 60.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="", help="default: the command's default grid")
    p.add_argument("--scheduler", default=None, help="None (serial) or 'local'")
    p.add_argument("--out", default=None, help="folder of the phase diagram (default: a temp)")
    p.add_argument("--json", default=None, help="write the timings and cells to this file")
    return p.parse_args(argv)


def baseline() -> float:
    """Seconds of one ``rmt.dmft_delta_nn`` call (phase retrieval, softplus/Huber, m = 2)."""
    cfg = rmt.RunConfig()
    t0 = time.perf_counter()
    rmt.dmft_delta_nn(cfg.model(), cfg.net(), 0.5, cfg.max_delta, **cfg.dmft_options())
    return time.perf_counter() - t0


def main(argv=None):
    args = parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}")
    grid = parse_grid(args.grid)
    base = baseline()
    print(
        f"baseline: one dmft_delta_nn call (phase retrieval, softplus/Huber, m = 2): {base:.1f} s"
    )
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="phase-diagram-"))
    t0 = time.perf_counter()
    res = phase_diagram(rmt.RunConfig(), grid, out=out, scheduler=args.scheduler, progress=False)
    wall = time.perf_counter() - t0
    cells = len(res.rows)
    for r in res.rows:
        value = (
            f"{r['delta_nn']:.3f} ± {r['stderr']:.3f}" if r["status"] == "found" else r["status"]
        )
        axes = ", ".join(f"{k}={r[k]}" for k in grid)
        print(f"  {axes}: {value} ({r['seconds']:.1f} s)")
    print(
        f"grid of {cells} cells: {wall:.0f} s = {wall / base:.1f} baseline calls "
        f"(goal {GOAL_S:.0f} s: {'met' if wall <= GOAL_S else 'not met'})"
    )
    if args.json:
        payload = {
            "cpu": info,
            "grid": {k: list(v) for k, v in grid.items()},
            "scheduler": args.scheduler,
            "baseline_s": base,
            "wall_s": wall,
            "ratio": wall / base,
            "cells": res.rows,
        }
        pathlib.Path(args.json).write_text(json.dumps(payload, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
