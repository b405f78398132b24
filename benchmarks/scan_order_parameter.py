"""The order parameter of ``delta_NN`` at ``W1`` on a grid of ``delta`` (docs/theory.md 7.4).

For each ``(delta, seed)``: gradient descent to its plateau ``W1`` and the bottom eigenpairs of
``H(W1)`` (:func:`rmt.experiments.learning.plateau_point`), one CSV row each: the bottom
eigenvalue, its eigenvector's squared ``Theta*`` overlap, the order parameter, the per-spectrum
decision, the gap ratio and the overlap of the second eigenvector.  Then one line per ``delta``:
the seed mean of the order parameter and its standard error, and where that mean crosses its
level on the grid.  Rows already in ``--out`` are kept and not recomputed.

    python benchmarks/scan_order_parameter.py --target abs --d 1000 \
        --deltas 1.6,1.8,2,2.2,2.4,2.6,2.8,3,3.2 --seeds 8 --out scan_abs_1000.csv
"""

from __future__ import annotations

import argparse
import csv
import pathlib

import numpy as np

COLUMNS = [
    "target", "d", "delta", "seed", "plateau_step", "bottom_eigenvalue", "bottom_overlap",
    "order_parameter", "has_descent_outlier", "gap_ratio", "second_overlap", "seconds",
]  # fmt: skip


def scan_rows(target, d, deltas, seeds, out):
    """Compute the missing rows of ``out`` (a CSV path) and return all rows of the grid."""
    import rmt
    from rmt.experiments.learning import plateau_point

    cfg = rmt.RunConfig(target=target, d=d)
    path = pathlib.Path(out)
    done = {}
    if path.exists():
        with path.open() as f:
            for r in csv.DictReader(f):
                done[(float(r["delta"]), int(r["seed"]))] = r
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        if new:
            writer.writeheader()
        for x in deltas:
            for s in seeds:
                if (x, s) in done:
                    continue
                p = plateau_point(cfg, x, s)
                row = {k: p.get(k) for k in COLUMNS if k in p}
                second = p["overlaps"][1] if p["overlaps"] else None
                row.update(target=target, d=d, second_overlap=second)
                writer.writerow(row)
                f.flush()
                done[(x, s)] = row
    return [done[(x, s)] for x in deltas for s in seeds]


def summary_lines(rows, deltas):
    """One line per ``delta``: the seed mean of the order parameter and its standard error."""
    lines = []
    for x in deltas:
        v = np.array([float(r["order_parameter"]) for r in rows if float(r["delta"]) == x])
        se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
        lines.append(f"delta = {x:g}: order parameter {v.mean():.4f} +- {se:.4f} ({v.size} seeds)")
    return lines


def crossing_line(rows, deltas, target, d):
    """The crossing of the grid's seed means (:func:`rmt.thresholds.statistics.crossing_estimate`),
    the level counting every run of the grid (:func:`rmt.thresholds.statistics.order_level`)."""
    import rmt
    from rmt.thresholds.statistics import crossing_estimate, order_level

    k, m = rmt.RunConfig(target=target).model().k, rmt.RunConfig().width
    evals = [
        (x, [float(r["order_parameter"]) for r in rows if float(r["delta"]) == x]) for x in deltas
    ]
    level = order_level(d, k, m, len(rows))
    est = crossing_estimate(evals, level)
    if not est.found:
        return f"crossing of {level:.3g}: not found ({est.reason})"
    return (
        f"crossing of {level:.3g}: {est.delta:.3f}, interval {est.interval}, bracket {est.bracket}"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="phase_retrieval")
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--deltas", default="1.6,1.8,2,2.2,2.4,2.6,2.8,3,3.2")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    deltas = [float(x) for x in args.deltas.split(",")]
    rows = scan_rows(args.target, args.d, deltas, range(args.seeds), args.out)
    print("\n".join(summary_lines(rows, deltas)))
    print(crossing_line(rows, deltas, args.target, args.d))


if __name__ == "__main__":
    main()
