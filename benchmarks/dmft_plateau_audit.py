"""Where each evaluation of a ``delta_NN`` search reads its plateau (docs/theory.md 8.10).

For each width, runs the phase diagram's cell search
(``rmt.experiments.phase_diagram.cell_threshold``: no further replicas) and prints, for every
pilot and full evaluation, ``delta``, the rule's plateau ``t1``, where the margin was read and
how: ``vertex`` (the minimum of a convex parabola through the smoothed mean gradient norm
within ``t1 +- VERTEX_WINDOW``), ``at t1`` (that parabola not convex, or its minimum outside
the window: the rule's minimum itself) or ``settled`` (a flat loss without a minimum of the
norm, read ``PLATEAU_WINDOW`` steps later once the margin has settled); failed evaluations
with their reason.  One whose ``t1`` jumps far from its neighbours' has a plateau of another
kind there.

Run: ``python benchmarks/dmft_plateau_audit.py [--widths 2 3 4] [--loss huber]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import time

from _util import cpu_info

import rmt
from rmt.experiments.phase_diagram import cell_threshold


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--activation", default="softplus")
    p.add_argument("--loss", default="huber")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def how_found(ev) -> str:
    """``vertex``, ``at t1`` or ``settled`` (see the module docstring)."""
    if ev.message.startswith("loss of the mean curves flat"):
        return "settled"
    return "at t1" if ev.vertex == ev.t1 else "vertex"


def main(argv=None):
    args = parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}")
    rows = []
    for width in args.widths:
        cfg = rmt.RunConfig(width=width, activation=args.activation, loss=args.loss)
        seen = []
        t0 = time.perf_counter()
        res = cell_threshold(cfg, progress=seen.append)
        wall = time.perf_counter() - t0
        value = f"{res.value:.3f} +- {res.stderr:.3f}" if res.converged else "no value"
        print(f"m = {width}: {value} ({wall:.0f} s)")
        for ev in seen:
            kind = "full" if any(ev is e for e in res.evaluations.values()) else "pilot"
            if not ev.converged:
                print(f"  {kind:5s} delta = {ev.delta:.4g}: failed ({ev.message[:110]})")
                rows.append({"width": width, "delta": ev.delta, "kind": kind, "failed": ev.message})
                continue
            found = how_found(ev)
            print(
                f"  {kind:5s} delta = {ev.delta:.4g}: t1 = {ev.t1}, vertex {ev.vertex:.1f} "
                f"({found}), margin {ev.margin:+.4f} +- {ev.margin_se:.4f}"
            )
            rows.append({
                "width": width, "delta": ev.delta, "kind": kind, "t1": ev.t1,
                "vertex": ev.vertex, "found": found, "margin": ev.margin, "se": ev.margin_se,
            })  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": info, "activation": args.activation, "loss": args.loss,
                       "rows": rows}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
