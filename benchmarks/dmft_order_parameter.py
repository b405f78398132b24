"""The order parameter of ``delta_NN`` at ``d -> inf``: the DMFT's counterpart of the scans.

``scan_order_parameter.py`` measures, at ``W1`` of gradient descent, the squared ``Theta*``
overlap of the bottom eigenvector of ``H(W1)`` when its eigenvalue is negative (else 0), at
``d = 1000`` and ``2000`` (docs/theory.md 7.4).  Its ``d -> inf`` limit is given by the Hessian
law at the DMFT plateau (docs/theory.md 8.9): the squared ``Theta*`` overlap of the lowest
left outlier when it is negative, else 0 (below the threshold the bottom of the spectrum is the
bulk edge, whose eigenvectors carry no ``Theta*``).  This script evaluates it with
:func:`rmt.dmft_margin` on the scans' grid (``DMFTHessian.order_parameter``; replicas of
independent draws, mean and standard error over them), so that the simulated values at two
sizes and the ``d -> inf`` one stand side by side, and prints where each crosses the scans'
level.

Run: ``python benchmarks/dmft_order_parameter.py --target phase_retrieval
[--deltas 2.2,2.4,...] [--replicas 8] [--scans A.csv B.csv] [--out FILE.csv]``.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import time

import numpy as np

import rmt


def crossing(deltas, means, level):
    """The first ``delta`` where the piecewise-linear curve of ``means`` reaches ``level``
    from below (NaN when it does not on the grid)."""
    for (x0, y0), (x1, y1) in zip(zip(deltas, means), zip(deltas[1:], means[1:])):
        if y0 < level <= y1:
            return x0 + (level - y0) * (x1 - x0) / (y1 - y0)
    return float("nan")


def scan_means(path, deltas):
    """The seed means of a scan CSV on ``deltas`` (NaN where the scan has none)."""
    rows = list(csv.DictReader(open(path)))
    d = int(rows[0]["d"])
    means = []
    for x in deltas:
        v = [float(r["order_parameter"]) for r in rows if float(r["delta"]) == x]
        means.append(np.mean(v) if v else np.nan)
    return d, np.array(means)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="phase_retrieval")
    ap.add_argument("--deltas", default="2.2,2.4,2.6,2.8,3,3.2,3.6,4")
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--level", type=float, default=0.05, help="the scans' crossing level")
    ap.add_argument("--scans", nargs="*", default=[], help="scan CSVs to set beside it")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    deltas = [float(x) for x in args.deltas.split(",")]
    cfg = rmt.RunConfig(target=args.target)
    model, net = cfg.model(), cfg.net()
    rows = []
    t0 = time.perf_counter()
    for x in deltas:
        ev = rmt.dmft_margin(model, net, x, replicas=args.replicas, **cfg.dmft_options())
        if not ev.converged:
            print(f"delta = {x:g}: failed: {ev.message}", flush=True)
            rows.append({"delta": x, "mean": np.nan, "se": np.nan, "t1": None,
                         "overlap": np.nan, "outlier": np.nan, "note": ev.message})  # fmt: skip
            continue
        op = np.array([h.order_parameter for h in ev.hessians])
        se = op.std(ddof=1) / np.sqrt(op.size)
        theta_out, overlap = (
            np.mean(v[np.isfinite(v)]) if np.isfinite(v).any() else np.nan
            for v in (np.array([h.theta_outlier for h in ev.hessians]),
                      np.array([h.theta_overlap for h in ev.hessians]))
        )  # fmt: skip
        rows.append({"delta": x, "mean": op.mean(), "se": se, "t1": ev.t1, "overlap": overlap,
                     "outlier": theta_out, "note": ""})  # fmt: skip
        print(f"delta = {x:g}: t1 = {ev.t1}, order parameter {op.mean():.4f} ± {se:.4f} "
              f"(Theta* outlier {theta_out:.4g}, its overlap {overlap:.3f}; margin "
              f"{ev.margin:.3g} ± {ev.margin_se:.2g})", flush=True)  # fmt: skip
    wall = time.perf_counter() - t0
    means = np.array([r["mean"] for r in rows])
    print(f"d -> inf: crossing of {args.level:g} at {crossing(deltas, means, args.level):.3f}")
    for path in args.scans:
        d, sim = scan_means(path, deltas)
        print(f"d = {d}: crossing of {args.level:g} at {crossing(deltas, sim, args.level):.3f} "
              f"(on this grid)")  # fmt: skip
    print(f"wall time {wall:.0f} s")
    if args.out:
        out = pathlib.Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
