"""Simulated ``delta_NN`` against where gradient descent learns (docs/theory.md section 7.4).

For one target, activation, loss, width ``m`` and ``d`` (by default softplus/Huber, m = 2;
the ``rmt.RunConfig`` defaults otherwise):

1. ``rmt.trained_thresholds(config, lo, hi, gd=False)``: where the seed mean of the order
   parameter at ``W1`` crosses its level, with the interval, the level, the stated error rates,
   every evaluation (per-seed values) and every run's bottom spectrum;
2. on a grid of ``delta``, gradient descent for ``config.train_steps`` steps from the same
   start as (1): the final ``Theta*`` overlap of each seed, and whether it learned (>= 0.5);
   ``--gd-deltas ""`` skips it.

One JSON file, strict (no NaN), and a short summary on stdout.

    python benchmarks/validate_simulated_delta_nn.py --target abs --d 2000 --seeds 4 \
        --out results/simulated_delta_nn/abs_d2000.json
    python benchmarks/validate_simulated_delta_nn.py --width 1 --lo 2 --hi 8 --gd-deltas "" \
        --out results/simulated_delta_nn/pr_m1_d1000.json
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np


def final_overlap(config, delta, seed) -> float:
    """Final ``Theta*`` overlap of gradient descent at ``(delta, seed)`` (no test set pass)."""
    from threadpoolctl import threadpool_limits

    from rmt.experiments.learning import run_descent

    with threadpool_limits(limits=1, user_api="blas"):
        _, run, _ = run_descent(config, delta, seed, with_test=False)  # learn_point's start
    return float(run.overlap[-1])


def learning_grid(config, deltas) -> list[dict]:
    """Final overlaps and the learned count of every seed at each ``delta``."""
    from rmt.experiments.learning import LEARNED_OVERLAP

    out = []
    for x in deltas:
        t0 = time.perf_counter()
        finals = [final_overlap(config, x, s) for s in config.seeds]
        learned = sum(f >= LEARNED_OVERLAP for f in finals)
        out.append({"delta": x, "final_overlaps": finals, "learned": learned,
                    "seeds": len(finals), "seconds": time.perf_counter() - t0})  # fmt: skip
        print(f"  GD at delta = {x:g}: learned {learned}/{len(finals)}, final overlaps "
              f"{np.round(finals, 3).tolist()}", flush=True)  # fmt: skip
    return out


def main():
    import rmt
    from rmt.experiments.store import strict_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="phase_retrieval")
    ap.add_argument("--activation", default="softplus")
    ap.add_argument("--loss", default="huber")
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--lo", type=float, default=1.5)
    ap.add_argument("--hi", type=float, default=4.0)
    ap.add_argument("--gd-deltas", default="2.2,2.4,2.6,2.8,3.0,3.2", help='"" skips GD')
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cfg = rmt.RunConfig(
        target=args.target,
        activation=args.activation,
        loss=args.loss,
        width=args.width,
        d=args.d,
        seeds=tuple(range(args.seeds)),
    )
    t0 = time.perf_counter()
    res = rmt.trained_thresholds(cfg, args.lo, args.hi, gd=False, progress=print)
    t_nn = time.perf_counter() - t0
    nn = res.delta_nn.as_dict()
    print(f"delta_NN = {nn['delta']} interval {nn['interval']} ({t_nn:.0f} s)", flush=True)
    grid = learning_grid(cfg, [float(x) for x in args.gd_deltas.split(",") if x.strip()])
    payload = {
        "config": cfg.to_dict(),
        "search": [args.lo, args.hi],
        "delta_nn": nn,
        "delta_nn_seconds": t_nn,
        "runs": res.runs,
        "learning": grid,
        "learning_seconds": time.perf_counter() - t0 - t_nn,
    }
    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(strict_json(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
