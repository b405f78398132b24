"""Gradient descent kept off ``Theta*`` at finite ``d`` against the DMFT from ``M(0) = 0``.

At finite ``d`` a random start ``W^0`` (entries ``init_scale * N(0, 1/d)``) has an overlap
``M(0) = W^{0T} Theta*`` of size ``init_scale / sqrt(d)``, and each step's sample noise adds
``O(n^{-1/2})`` along ``Theta*``.  The ``d -> inf`` equations start from ``M(0) = 0`` and, for an
even target (phase retrieval), keep ``M = 0``: ``M = 0`` is invariant.  Where descent amplifies
``M`` (quadratic activation from ``init_scale = 0.01``), GD at ``d = 2000`` leaves the DMFT
within 60 steps (benchmarks/RESULTS.md, "DMFT curves against gradient descent").  This script
tests that this is the finite-size escape and nothing else: it runs, for each seed, GD as it is
and GD whose iterates are projected off ``Theta*`` after every step (the dynamics on the
invariant set ``M = 0`` at finite ``d``), and compares both with the DMFT solved from
``M(0) = 0`` (replicas of independent draws), at two sizes.  A cell passes when
``|DMFT - GD| <= 4 sqrt(se_gd^2 + se_dmft^2) + 0.01 |GD|`` (``3 / d`` for ``|M|^2``), the rule of
``validate_dmft_curves.py``; after a DMFT replica fails, its cells are failed (its steps
before the failure are compared).

Run: ``python benchmarks/validate_finite_size_start.py [--sizes 2000 8000] [--seeds 3]
[--losses huber square] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import time

import numpy as np
from _util import cpu_info
from validate_dmft_curves import compare as curves_compare

import rmt

QUANTITIES = ("train", "M2", "trQ")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--activation", default="quadratic")
    p.add_argument("--losses", nargs="+", default=["huber", "square"])
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--delta", type=float, default=4.0)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--init", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--draws", type=int, default=10_000, help="DMFT draws a solve")
    p.add_argument("--replicas", type=int, default=2, help="DMFT solves a seed (other draws)")
    p.add_argument("--out", default=None, help="folder for the CSV and the JSON summary")
    return p.parse_args(argv)


def checkpoints(steps):
    return (steps // 4, steps // 2, steps - 1)


def gd_run(model, net, args, d, seed, points, project):
    """GD for one seed (``project``: iterates projected off ``Theta*`` after every step); every
    quantity at ``points`` (NaN after a divergence)."""
    n = int(round(args.delta * d))
    data = model.sample(n, d, rng=1000 + seed)
    theta = data.theta / np.linalg.norm(data.theta, axis=0)
    off = (lambda W: W - theta @ (theta.T @ W)) if project else (lambda W: W)
    rng = np.random.default_rng(3000 + seed)
    W = off(args.init * rng.standard_normal((d, args.m)) / np.sqrt(d))
    out = {q: np.full(len(points), np.nan) for q in QUANTITIES}
    with np.errstate(all="ignore"):
        for t in range(points[-1] + 1):
            loss, grad = net.loss_and_grad(data, W)
            if not np.isfinite(loss):
                break
            if t in points:
                j = points.index(t)
                out["train"][j] = loss
                out["M2"][j] = np.sum((W.T @ data.theta) ** 2)
                out["trQ"][j] = np.sum(W**2)
            W = off(W - args.lr * grad)
    return out


def dmft_runs(model, net, args, points):
    """The DMFT from ``M(0) = 0``: every quantity at ``points`` (``replicas x points``; NaN from
    the step where a replica failed) and the failures' messages."""
    with np.errstate(all="ignore"):
        rep = rmt.dmft_replicas(
            model, net, args.delta, args.lr, args.steps, args.init,
            replicas=args.replicas, n_samples=args.draws, rng=0,
        )  # fmt: skip
    out = {q: np.full((args.replicas, len(points)), np.nan) for q in QUANTITIES}
    notes = []
    for r, res in enumerate(rep.results):
        if not res.converged:
            notes.append(f"replica {r}: {res.message}")
        idx = [t for t in points if t < len(res.train_loss)]  # a failed solve: its steps done
        k = len(idx)
        out["train"][r, :k] = res.train_loss[idx]
        out["M2"][r, :k] = np.sum(res.M[idx] ** 2, axis=(1, 2))
        out["trQ"][r, :k] = np.trace(res.Q[idx], axis1=1, axis2=2)
    return out, notes


def compare(sim, theory, d, points):
    """Per quantity and point: the two means and standard errors, the gap over its tolerance
    and pass, by the rule of ``validate_dmft_curves.compare``."""
    return [
        {"quantity": r["quantity"], "t": r["t"], "gd": r["gd_mean"], "gd_se": r["gd_se"],
         "dmft": r["dmft_mean"], "dmft_se": r["dmft_se"],
         "ratio": r["gap"] / r["tol"] if np.isfinite(r["gap"]) else np.nan,
         "passed": r["passed"]}
        for r in curves_compare(sim, theory, d, points, QUANTITIES)
    ]  # fmt: skip


def main(argv=None):
    args = parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}; {args.activation}, m = {args.m}, delta = {args.delta}, "
          f"lr = {args.lr}, init = {args.init}, {args.steps} steps")  # fmt: skip
    model = rmt.MultiIndexModel("phase_retrieval")
    points = list(checkpoints(args.steps))
    rows = []
    t0 = time.perf_counter()
    for loss in args.losses:
        net = rmt.TwoLayerNet(args.m, args.activation, loss)
        theory, notes = dmft_runs(model, net, args, points)
        for note in notes:
            print(f"{loss}: DMFT {note}", flush=True)
        for d in args.sizes:
            for project in (False, True):
                sims = [gd_run(model, net, args, d, s, points, project) for s in range(args.seeds)]
                sim = {q: np.array([x[q] for x in sims]) for q in QUANTITIES}
                cells = compare(sim, theory, d, points)
                label = "kept off Theta*" if project else "as it is"
                worst = max(cells, key=lambda c: -1 if np.isnan(c["ratio"]) else c["ratio"])
                failed = [c for c in cells if not c["passed"]]
                for c in cells:
                    rows.append({"loss": loss, "d": d, "kind": label, **c})
                m2 = [c for c in cells if c["quantity"] == "M2"][-1]
                print(
                    f"{loss:>6} d={d:5d} GD {label:<15}: {len(cells) - len(failed)} of "
                    f"{len(cells)} cells pass; worst {worst['quantity']} at t = "
                    f"{worst['t']}: gap/tol {worst['ratio']:.2f}; |M|^2 at t = "
                    f"{points[-1]}: GD {m2['gd']:.3g}, DMFT {m2['dmft']:.3g}",
                    flush=True,
                )
    wall = time.perf_counter() - t0
    print(f"wall time {wall:.0f} s")
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "finite_size_start.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        (out / "finite_size_start.json").write_text(
            json.dumps({"cpu": info, "args": vars(args), "wall_s": wall}, indent=1)
        )


if __name__ == "__main__":
    main()
