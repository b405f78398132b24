"""The Hessian at the plateau and at the end of a gradient-descent run: does it stay put?

The plateau-length law (docs/theory.md 7.7) takes the Hessian at the plateau ``W1`` as fixed
until the escape.  For one run of ``rmt.experiments.learning.run_descent`` (the default
``rmt.RunConfig``: phase retrieval, softplus/Huber, m = 2, lr 0.5, init 0.01) at ``(d, delta,
seed)`` this prints the training loss, gradient norm and ``Theta*`` overlap along the run, and
the bottom ``--k`` eigenvalues of the Hessian with the ``Theta*`` overlaps of their
eigenvectors (``rmt.extreme_eigs``, tolerance 1e-8) at ``W1`` and at the last iterate.  The run
stops 5 steps after its escape (overlap 0.5) or at ``--steps``.

Run: ``python benchmarks/grokking_hessian_drift.py --d 4000 --delta 2.9 --seed 1 --steps 6000``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
from _util import cpu_info, set_threads

import rmt
from rmt.experiments.learning import run_descent
from rmt.operators.hessian import Hessian

#: the steps after the plateau at which the curves are printed (and the last step)
MARKS = (0, 500, 1000, 2000, 3000, 4000, 5000)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--delta", type=float, default=2.9)
    p.add_argument("--seed", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=6000, help="the step budget")
    p.add_argument("--k", type=int, default=6, help="bottom eigenpairs")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    set_threads(args.threads)
    print(f"CPU {cpu_info()['model']}; {args.threads} thread(s)")
    cfg = replace(rmt.RunConfig(), d=args.d, train_steps=args.steps)
    net = cfg.net()
    for seed in args.seed:
        t0 = time.perf_counter()
        data, run, _ = run_descent(cfg, args.delta, seed, with_test=False, stop_after_escape=5)
        print(
            f"d = {args.d}, delta = {args.delta:g}, seed {seed}: plateau {run.plateau_step}, "
            f"escape {run.escape_step}, {len(run.loss)} steps ({time.perf_counter() - t0:.0f} s)"
        )
        last = len(run.loss) - 1
        steps = sorted({min(run.plateau_step + s, last) for s in MARKS} | {last})
        for t in steps:
            print(
                f"  step {t}: loss {run.loss[t]:.6f}, gradient norm {run.grad_norm[t]:.3e}, "
                f"Theta* overlap {run.overlap[t]:.4f}"
            )
        for name, W in (("W1", run.W1), ("last iterate", run.W_final)):
            res = rmt.extreme_eigs(Hessian(net, data, W), k=args.k, which="smallest", tol=1e-8)
            ov = np.ravel(rmt.overlaps(res.vectors, data.theta, net.width))
            print(
                f"  {name}: bottom eigenvalues {np.round(res.values, 5).tolist()}; "
                f"Theta* overlaps {np.round(ov, 4).tolist()}"
            )


if __name__ == "__main__":
    main()
