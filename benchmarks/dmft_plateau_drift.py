"""The Hessian along the DMFT trajectory after its plateau: does the plateau drift at ``d -> inf``?

The plateau law of docs/theory.md 7.7 freezes the Hessian at the plateau ``t1``.  Gradient
descent at finite ``d`` drifts after ``t1``: the bottom of the spectrum rises as descent fits the
sample's noise (``grokking_hessian_drift.py``).  This script solves the DMFT past ``t1`` and
evaluates the Hessian law (docs/theory.md 8.9) at later steps: the left edge, the ``Theta*``
outlier and its overlap, the learning margin, and the race's running sum
``sum_t log(g_o(t) / g_e(t))`` with ``g = |1 - lr lambda|`` (7.7), which the generalised law
compares with ``(1/2) log(m d)``, and the outlier's own growth
``G = sum_t log g_o(t)`` from ``t1`` until it merges with the edge
(:func:`rmt.dynamics.escape.outlier_growth`; :func:`rmt.outlier_lifetime` gives ``G`` alone).  The solve costs ``T^3`` (8.8), so ``T`` stays in the
hundreds.

Run: ``python benchmarks/dmft_plateau_drift.py --delta 3.2 --steps 600 [--every 50]
[--replicas 2] [--first 0] [--draws 2500]``; ``--collect DIR`` instead reads every
``delta*.log`` of ``DIR`` and writes ``DIR/growth.csv``: one row per (``delta``, replica) with
``t1``, the merge step and ``G``.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import re
import time

import numpy as np

import rmt
from rmt.dynamics.dmft import hessian_at_step, plateau_of_curves
from rmt.dynamics.escape import outlier_growth
from rmt.thresholds.asymptotic import dmft_plateau_rule


def collect(folder) -> list[dict]:
    """Per (``delta``, replica) of the logs in ``folder``: ``t1``, the merge step (None: not
    within the run) and ``G`` by :func:`rmt.dynamics.escape.outlier_growth` on the logged
    outliers; written to ``folder/growth.csv``."""
    folder = pathlib.Path(folder)
    rows = []
    for path in sorted(folder.glob("delta*.log")):
        head = re.match(r"delta([0-9.]+?)(_T(\d+))?(_more\d*)?\.log", path.name)
        cur = None
        for line in path.read_text().splitlines():
            m = re.match(r"replica (\d+): solved (\d+) steps .* plateau (\d+)", line)
            if m:
                cur = {"delta": float(head.group(1)), "replica": int(m.group(1)),
                       "steps": int(m.group(2)), "t1": int(m.group(3)), "at": [], "lam": []}  # fmt: skip
                rows.append(cur)
                continue
            m = re.match(r"\s+t =\s+(\d+):.*Theta\* outlier ([-+0-9.na]+) ", line)
            if m and cur is not None:
                cur["at"].append(int(m.group(1)))
                cur["lam"].append(float(m.group(2)))
    out = []
    for r in rows:
        g, merge = outlier_growth(r["at"], r["lam"], rmt.RunConfig().lr)
        out.append({"delta": r["delta"], "replica": r["replica"], "steps": r["steps"],
                    "t1": r["t1"], "merge": merge, "growth": g})  # fmt: skip
    out.sort(key=lambda r: (r["delta"], r["steps"], r["replica"]))
    with (folder / "growth.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delta", type=float, default=3.2)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--first", type=int, default=0, help="seed of the first replica")
    ap.add_argument("--draws", type=int, default=2500)
    ap.add_argument("--collect", default=None, help="write DIR/growth.csv from DIR's logs")
    args = ap.parse_args(argv)
    if args.collect:
        for r in collect(args.collect):
            print(r)
        return
    cfg = rmt.RunConfig()
    model, net = cfg.model(), cfg.net()
    for r in range(args.first, args.first + args.replicas):
        t0 = time.perf_counter()
        res = rmt.dmft_gd(
            model, net, args.delta, cfg.lr, args.steps, cfg.init_scale,
            n_samples=args.draws, rng=r,
        )  # fmt: skip
        solve = time.perf_counter() - t0
        if not res.converged:
            print(f"replica {r}: {res.message}")
            continue
        rule = dmft_plateau_rule()
        t1 = plateau_of_curves(res.train_loss, res.grad_norm, res.overlap, rule).plateau_step
        print(f"replica {r}: solved {args.steps} steps in {solve:.0f} s; plateau {t1}", flush=True)
        if t1 is None:
            continue
        race, last, at, lam = 0.0, None, [], []
        for t in [t1, *range(args.every * (t1 // args.every + 1), args.steps, args.every)]:
            h = hessian_at_step(res, net, t)
            go = abs(1 - cfg.lr * h.theta_outlier) if np.isfinite(h.theta_outlier) else np.nan
            ge = abs(1 - cfg.lr * h.edge_lo)
            step_gain = np.log(go / ge) if np.isfinite(go) else 0.0
            if last is not None:
                race += step_gain * (t - last)
            last = t
            at.append(t)
            lam.append(h.theta_outlier)
            gain, merge = outlier_growth(at, lam, cfg.lr)
            print(
                f"  t = {t:4d}: train {res.train_loss[t]:.4f}, grad {res.grad_norm[t]:.2e}, "
                f"overlap {res.overlap[t]:.4f}; edge {h.edge_lo:+.4f}, Theta* outlier "
                f"{h.theta_outlier:+.4f} (overlap {h.theta_overlap:.3f}), margin "
                f"{h.learning_margin:+.4f}; log(g_o/g_e) {step_gain:.2e}, race sum {race:.3f}; "
                f"outlier growth sum {gain:.2f}" + ("" if h.converged else f" [{h.message}]"),
                flush=True,
            )
        print(f"  G = {gain:.2f}, merged at step {merge}", flush=True)


if __name__ == "__main__":
    main()
