"""Where the ``Theta*`` row's linear law holds: the steps at which the overlap of gradient
descent crosses a ladder of levels, against the row's prediction (docs/theory.md 7.8).

For each ``delta``: one DMFT solve with the ``Theta*`` row (``rmt.RunConfig()``'s setting:
phase retrieval, softplus/Huber, m = 2, lr 0.5, init 0.01) gives, through
``rmt.dynamics.escape.seeded_escape_steps``, the step at which the median run's overlap
crosses each level at dimension ``d``; ``--seeds`` gradient-descent runs at that ``d`` give
the measured crossings (median and quartiles over the runs). Writes ``levels.md`` and
``MANIFEST.md`` to ``--out``.

Run: ``python benchmarks/grokking_row_levels.py --deltas 7.0:300 4.6:400 --d 1000 --seeds 8
--out DIR``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import numpy as np
from _util import cpu_info

import rmt
from rmt.dynamics.escape import seeded_escape_steps

LEVELS = (0.003, 0.01, 0.03, 0.1, 0.3, 0.5)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--deltas", nargs="+", required=True, help="DELTA:STEPS")
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--draws", type=int, default=2500)
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def crossings(overlap, levels):
    """The first step at which ``overlap`` reaches each level (None: never)."""
    out = []
    for lev in levels:
        hit = np.flatnonzero(np.asarray(overlap) >= lev)
        out.append(int(hit[0]) if hit.size else None)
    return out


def main(argv=None):
    args = parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = rmt.RunConfig()
    model, net = cfg.model(), cfg.net()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = " | ".join(f"{lev:g}" for lev in LEVELS)
    lines = [
        f"Overlap crossings at d = {args.d}: the row's median run, then GD's median [q25, q75] "
        f"over {args.seeds} runs (a run that never crosses counts as later than the horizon)",
        "",
        f"| delta | horizon | source | {head} |",
        "|---|---|---|" + "---|" * len(LEVELS),
    ]
    for item in args.deltas:
        delta, steps = float(item.split(":")[0]), int(item.split(":")[1])
        res = rmt.dmft_gd(
            model, net, delta, cfg.lr, steps, cfg.init_scale, n_samples=args.draws,
            rng=cfg.seeds[0], theta_row=True,
        )  # fmt: skip
        trace_q = np.trace(res.Q, axis1=1, axis2=2)
        row = [seeded_escape_steps(res.seed_cov, trace_q, args.d, (0.5,), lev)[0] for lev in LEVELS]
        runs = []
        for s in range(args.seeds):
            data = model.sample(int(round(delta * args.d)), args.d, rng=[s, 1])
            run = rmt.gradient_descent(
                net, data, lr=cfg.lr, steps=steps - 1, rng=[s, 2], init_scale=cfg.init_scale,
                progress=False,
            )  # fmt: skip
            runs.append([np.inf if c is None else c for c in crossings(run.overlap, LEVELS)])
        q = np.quantile(np.array(runs, dtype=float), [0.25, 0.5, 0.75], axis=0)

        def cell(v):
            return "> horizon" if not np.isfinite(v) else f"{v:.0f}"

        lines.append(
            f"| {delta:g} | {steps} | Theta* row | "
            + " | ".join("> horizon" if c is None else str(c) for c in row)
            + " |"
        )
        lines.append(
            f"| {delta:g} | {steps} | GD | "
            + " | ".join(
                f"{cell(q[1, j])} [{cell(q[0, j])}, {cell(q[2, j])}]" for j in range(len(LEVELS))
            )
            + " |"
        )
        print(lines[-2], lines[-1], sep="\n", flush=True)
    (out / "levels.md").write_text("\n".join(lines) + "\n")
    cpu = cpu_info()
    (out / "MANIFEST.md").write_text(
        "# Overlap crossings: the Theta* row against gradient descent\n\n"
        f"Command: `python {' '.join(sys.argv)}`\n"
        f"Started: {started}; CPU: {cpu['model']}, {cpu['simd']}, {os.cpu_count()} vCPUs.\n"
        f"DMFT: one solve of {args.draws} draws per delta (seed {cfg.seeds[0]}); GD: data "
        "`[s, 1]`, start `[s, 2]` for run s.\n\nFiles: `levels.md`.\n"
    )


if __name__ == "__main__":
    main()
