"""The asymptotic delta_NN (``rmt.dmft_delta_nn``): its wall time and its standard error.

The goal: ``delta_NN`` with a standard error of at most 0.02 in at most 60 s on the project's
2-core machine, for phase retrieval, softplus/Huber, m = 2 (docs/theory.md 8.10).  A Monte Carlo
error falls like ``N^{-1/2}`` and the time grows like ``N``; the search adds replicas at its
last point until the standard error is at most ``stderr_rtol`` of the value, so each call is
checked against the goal as it stands: its time and its error.

The baseline, timed in the same run: one DMFT solve of the same draws (one replica at
``delta = 4``, stopped at its plateau).  The search's time in units of that solve is its
cost in solves, which is what the algorithm (not the machine) decides.

Run: ``python benchmarks/bench_dmft_threshold.py [--seeds 0 1 2] [--replicas R] [--draws N]
[--law-draws L]`` (defaults: those of ``rmt.dmft_delta_nn``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import time

import numpy as np
from _util import cpu_info

import rmt

GOAL_SE, GOAL_S = 0.02, 60.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--replicas", type=int, default=None, help="default: rmt.dmft_delta_nn's")
    p.add_argument("--draws", type=int, default=None, help="default: rmt.dmft_delta_nn's")
    p.add_argument("--law-draws", type=int, default=None, help="default: rmt.dmft_delta_nn's")
    p.add_argument("--target", default="phase_retrieval")
    p.add_argument("--json", default=None, help="write the rows to this JSON file")
    return p.parse_args(argv)


def baseline_solve(model, net, draws) -> float:
    """Seconds of one replica's solve at ``delta = 4`` stopped at its plateau."""
    rmt.dmft_gd(model, net, 4.0, 0.5, 3, 0.01, n_samples=64, n_test=100)  # compile
    t0 = time.perf_counter()
    rmt.dmft_gd(model, net, 4.0, 0.5, 400, 0.01, n_samples=draws, n_test=1000,
                stop_at_plateau=True)  # fmt: skip
    return time.perf_counter() - t0


def main(argv=None):
    args = parse_args(argv)
    model = rmt.MultiIndexModel(args.target)
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}")
    defaults = inspect.signature(rmt.dmft_delta_nn).parameters
    opts = {
        name: defaults[name].default if value is None else value
        for name, value in (
            ("replicas", args.replicas), ("n_samples", args.draws), ("law_draws", args.law_draws)
        )
    }  # fmt: skip
    print(f"settings: {opts}")
    unit = baseline_solve(model, net, opts["n_samples"])
    print(f"baseline: one solve of {opts['n_samples']} draws at delta = 4: {unit:.2f} s")
    rows = []
    for seed in args.seeds:
        t0 = time.perf_counter()
        res = rmt.dmft_delta_nn(model, net, rng=seed, **opts)
        wall = time.perf_counter() - t0
        row = {
            "seed": seed,
            "converged": res.converged,
            "delta_nn": res.value if res.converged else None,
            "stderr": res.stderr if res.converged else None,
            "wall_s": wall,
            "cost_in_solves": wall / unit,
            "replicas": res.replicas,
            "evaluations": len(res.evaluations),
            "pilot_evaluations": len(res.pilot_evaluations),
            "message": res.message,
            "law_shift": res.law_shift if np.isfinite(res.law_shift) else None,
            "law_shift_se": res.law_shift_se if np.isfinite(res.law_shift_se) else None,
        }
        if res.converged:
            row["time_for_goal_se_s"] = wall * (res.stderr / GOAL_SE) ** 2
            row["meets_goal"] = bool(res.stderr <= GOAL_SE and wall <= GOAL_S)
            print(
                f"seed {seed}: delta_NN = {res.value:.4f} ± {res.stderr:.4f} in {wall:.1f} s "
                f"= {wall / GOAL_S:.2f} x the goal ({wall / unit:.1f} solves; "
                f"{len(res.pilot_evaluations)} pilot + {len(res.evaluations)} full evaluations, "
                f"{res.replicas} replicas at the last; law shift {res.law_shift:+.5f} ± "
                f"{res.law_shift_se:.5f}); goal met: {row['meets_goal']}"
            )
        else:
            print(f"seed {seed}: not determined in {wall:.1f} s: {res.message}")
        rows.append(row)
    ok = [r for r in rows if r["converged"]]
    if len(ok) >= 2:
        vals = np.array([r["delta_nn"] for r in ok])
        ses = np.array([r["stderr"] for r in ok])
        print(
            f"over {len(ok)} seeds: mean {vals.mean():.4f}, spread (sd) {vals.std(ddof=1):.4f}, "
            f"mean reported se {ses.mean():.4f}; median time "
            f"{np.median([r['wall_s'] for r in ok]):.1f} s, longest "
            f"{max(r['wall_s'] for r in ok):.1f} s; goal (se <= {GOAL_SE}, <= {GOAL_S:g} s) "
            f"met by {sum(r['meets_goal'] for r in ok)} of {len(rows)} calls"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"cpu": info, "settings": opts, "baseline_s": unit, "rows": rows}, f, indent=1
            )


if __name__ == "__main__":
    main()
