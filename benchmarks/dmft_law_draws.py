"""Does the Hessian law at the DMFT plateau converge in its number of draws?

One solve (phase retrieval, softplus, m = 2 or ``--width``, lr 0.5, init 0.01, 2500 draws, seed 0) stopped at
its plateau ``t1``; then the law at ``t1`` from ``L`` fresh draws of the per-sample process
(``rmt.dynamics.dmft.resampled_laws``, one seed, so the smaller sets are the first rows of the
larger), and its left edge, ``Theta*`` outlier and learning margin (docs/theory.md 8.10).  A
bounded law whose infimum is met often (the Huber loss) gives an edge that stops moving; a law
whose left edge is set by rare draws (the square loss: large labels with a preactivation near
0) gives one that keeps moving as ``L`` grows.  Also printed: the smallest eigenvalue of ``D``
among the draws.

Run: ``python benchmarks/dmft_law_draws.py [--loss square --delta 5] [--width 2]
[--draws 5000 ...]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _util import cpu_info

import rmt
from rmt.dynamics.dmft import hessian_at_step, resampled_laws


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loss", default="square", choices=("square", "huber"))
    p.add_argument("--delta", type=float, default=5.0)
    p.add_argument("--width", type=int, default=2)
    p.add_argument("--draws", type=int, nargs="+", default=[5000, 20000, 80000, 320000, 1280000])
    args = p.parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}")
    cfg = rmt.RunConfig(activation="softplus", loss=args.loss, width=args.width)
    model, net = cfg.model(), cfg.net()
    h0 = rmt.dmft_hessian(
        model, net, args.delta, steps=1200, stop_at_plateau=True, init_scale=0.01, lr=0.5,
        n_samples=2500, rng=0,
    )  # fmt: skip
    t1, res = h0.t1, h0.result
    print(f"softplus/{args.loss}, m = {args.width}, delta = {args.delta:g}: plateau at step {t1}")
    laws = resampled_laws(res, model, net, [t1], max(args.draws), np.random.default_rng(5))
    full = laws[t1]
    for L in sorted(args.draws):
        t = time.perf_counter()
        law = rmt.SpikeLaw(full.zhat[:L], full.D[:L], None, full.theta_dims, kind="empirical")
        h = hessian_at_step(res, net, t1, "the solve's plateau", 0.0, law=law)
        low = np.linalg.eigvalsh(law.D)[:, 0]
        print(
            f"L = {L:8d}: left edge {h.edge_lo:+.4f}, Theta* outlier {h.theta_outlier:+.4f}, "
            f"learning margin {h.learning_margin:+.4f}, min eig D {low.min():+.3f} "
            f"({time.perf_counter() - t:.1f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
