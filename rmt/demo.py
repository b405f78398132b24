"""``make demo``: the phase transition end to end, in a few minutes.

1. ``delta_pop / delta_alg`` (population point) for phase retrieval over activations, losses and widths, including
   the configurations without a transition (unbounded curvature, label-free point).
2. A sweep of about 8 values of ``delta`` around ``delta_pop`` for softplus + Huber, ``m = 2``,
   at the population point, ``d = 1000``: the bottom Hessian eigenvalue and its overlap with
   ``Theta*`` against the free-probability prediction.
3. Figures and tidy tables in ``results/demo``.
"""

from __future__ import annotations

import argparse
import pathlib
import time
from dataclasses import replace

import numpy as np

from .threads import configure_threads


def main(argv=None):
    configure_threads()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/demo", help="output folder (default %(default)s)")
    parser.add_argument("--d", type=int, default=1000, help="dimension (default %(default)s)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per delta (default 2)")
    parser.add_argument("--points", type=int, default=8, help="values of delta (default 8)")
    args = parser.parse_args(argv)

    from .commands import cmd_sweep
    from .config import RunConfig
    from .experiments import TABLE_COLUMNS, threshold_table
    from .output import format_threshold_table, save_figure_atomic, write_table
    from .plotting import threshold_figure

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
    print(f"demo finished in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
