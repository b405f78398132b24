"""``make demo``: the phase transition end to end, in a few minutes.

1. ``delta_pop / delta_alg`` (population point) for phase retrieval over activations, losses and widths, including
   the configurations without a transition (unbounded curvature, label-free point).
2. A sweep of about 8 values of ``delta`` around ``delta_pop`` for softplus + Huber, ``m = 2``,
   at the population point, ``d = 1000``: the bottom Hessian eigenvalue and its overlap with
   ``Theta*`` against the free-probability prediction.
3. What gradient descent does from a small random start, ``d = 200``, 7 values of ``delta``:
   the learning transition (final overlap) next to the Hessian transition at the plateau
   ``W1`` (``rmt learn``), both well above the population point's ``delta_pop``.
4. The phase diagram: the asymptotic ``delta_NN`` of the DMFT (``d -> inf``) with its
   standard error against the width, softplus + Huber (``rmt phase-diagram``), with
   ``DEMO_REPLICAS`` replicas a cell.  Width 1 is left out by default: its first phase
   converges slowly, and its margin settles only in solves of several hundred steps
   (docs/theory.md 8.10), minutes a cell.
5. The grokking-like delay: the plateau of gradient descent at ``d = 250`` above the ``m = 2``
   cell's ``delta_NN``, against the plateau-length law (``rmt grokking``).
6. Figures and tidy tables in ``results/demo``.
"""

from __future__ import annotations

import argparse
import pathlib
import time
from dataclasses import replace

import numpy as np

from rmt.app.commands import (
    cmd_grokking,
    cmd_learn,
    cmd_phase_diagram,
    cmd_sweep,
    format_estimate,
    format_threshold_value,
)
from rmt.app.plotting import save_figure_atomic, threshold_figure
from rmt.app.report import format_threshold_table
from rmt.experiments import TABLE_COLUMNS, threshold_table
from rmt.experiments.config import RunConfig
from rmt.experiments.store import write_table
from rmt.kernels.threads import configure_threads


def main(argv=None):
    configure_threads()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/demo", help="output folder (default %(default)s)")
    parser.add_argument("--d", type=int, default=1000, help="dimension (default %(default)s)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per delta (default 2)")
    parser.add_argument("--points", type=int, default=8, help="values of delta (default 8)")
    parser.add_argument(
        "--learn-d", type=int, default=200, help="dimension of the GD runs (default %(default)s)"
    )
    parser.add_argument(
        "--phase-widths",
        default="2,3",
        help="widths of the phase diagram, '' to skip it (default %(default)s)",
    )
    parser.add_argument(
        "--grokking-d",
        type=int,
        default=250,
        help="dimension of the plateau-length runs, 0 to skip them (default %(default)s)",
    )
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = RunConfig(
        target="phase_retrieval",
        width=2,
        activation="softplus",
        loss="huber",
        point="population",
        d=args.d,
        deltas=(1.0,),
        seeds=(0,),
    )
    print("== delta_pop / delta_alg, phase retrieval, population point ==")
    table = threshold_table(base)
    print(format_threshold_table(table))
    write_table(out / "threshold_table.csv", table, TABLE_COLUMNS)
    save_figure_atomic(threshold_figure(table, "population point"), out / "threshold_table.png")

    dnn = table[0]["delta_pop"]
    if not np.isfinite(dnn):
        raise SystemExit(f"the demo configuration has no transition: {table[0]['reason']}")
    deltas = tuple(np.round(np.geomspace(dnn / 2.5, dnn * 5.0, args.points), 4))
    config = replace(base, deltas=deltas, seeds=tuple(range(args.seeds)))
    print(
        f"\n== sweep: {len(deltas)} values of delta around delta_pop = {dnn:.3g}, "
        f"d = {args.d}, {args.seeds} seeds =="
    )
    summary = cmd_sweep(config, out / "sweep")
    print(
        f"largest |bottom eigenvalue - prediction| over the sweep: "
        f"{summary['max_abs_error_bottom']:.3g}"
    )
    print(
        f"files in {out}: threshold_table.csv/png; in {out / 'sweep'}: "
        + ", ".join(summary["files"])
    )
    learn = replace(
        base,
        point="trained",
        d=args.learn_d,
        deltas=(1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0),
        seeds=tuple(range(args.seeds)),
        train_steps=1500,
    )
    print(
        f"\n== what gradient descent learns: d = {args.learn_d}, {len(learn.deltas)} values "
        f"of delta, {args.seeds} seeds, from a small random start =="
    )

    res = cmd_learn(learn, out / "learn")
    t = {k: format_threshold_value(v) for k, v in res["thresholds"].items()}
    t.update({k: format_estimate(res[k]) for k in ("delta_gd", "delta_nn")})
    print(
        f"learning transition of GD: delta_GD {t['delta_gd']}; Hessian transition at the "
        f"plateau W1: delta_NN {t['delta_nn']}; population point: delta_pop = "
        f"{t['delta_pop']}; spectral methods: delta_alg = {t['delta_alg']}. Figures in "
        f"{out / 'learn'}"
    )
    if args.phase_widths:
        print(
            f"\n== the phase diagram: delta_NN of the DMFT (d -> inf) against the width "
            f"{args.phase_widths}, softplus + Huber, {DEMO_REPLICAS} replicas a cell =="
        )
        grid = f"width={args.phase_widths}"
        cells = replace(base, grid=grid, dmft_replicas=DEMO_REPLICAS)
        phase = cmd_phase_diagram(cells, out / "phase_diagram")
        found = [c for c in phase["cells"] if c["width"] == 2 and c["status"] == "found"]
        if args.grokking_d and found:
            grokking_demo(base, found[0], args.grokking_d, args.seeds, out / "grokking")
    print(f"demo finished in {time.perf_counter() - t0:.0f} s")


#: the replicas of each cell of the demo's phase diagram (``rmt phase-diagram`` uses 8)
DEMO_REPLICAS = 4

#: the demo's plateau-length runs: ``delta`` in units of ``delta_NN``, and seeds a ``delta``
GROKKING_RATIOS = (1.15, 1.35, 1.6, 1.9)
GROKKING_SEEDS = 3


def grokking_demo(base, cell, d, seeds, out):
    """The plateau of gradient descent at ``d`` for ``delta`` from 1.15 to 1.9 times the
    ``m = 2`` cell's ``delta_NN``, with the law beside it (``rmt grokking``)."""
    value, se = cell["delta_nn"], cell["stderr"]
    deltas = tuple(round(r * value, 2) for r in GROKKING_RATIOS)
    seeds = tuple(range(max(seeds, GROKKING_SEEDS)))
    print(
        f"\n== the grokking-like delay: the plateau of gradient descent at d = {d}, m = 2, "
        f"delta = {', '.join(map(str, deltas))} (delta_NN = {value:.3f}), "
        f"{len(seeds)} seeds =="
    )
    config = replace(
        base,
        d=d,
        deltas=deltas,
        seeds=seeds,
        train_steps=4000,
        delta_nn_mark=(value, se),
    )
    cmd_grokking(config, out)


if __name__ == "__main__":
    main()
