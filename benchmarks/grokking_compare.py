"""The plateau-length law (docs/theory.md 7.7) against gradient descent, with its figures.

Reads the runs of ``benchmarks/grokking_plateau.py`` (one or more JSON files), predicts the
plateau at each ``delta`` and ``d`` from the DMFT Hessian at its plateau
(``rmt.experiments.grokking.plateau_law``, on the runs' deltas and on a finer grid for the
curve), and writes to ``--out`` (``rmt grokking`` measures and predicts in one command, on the
runs' deltas only):

- ``comparison.md``: per ``(d, delta)`` the simulated median and quartiles, the predicted
  length and their ratio, and per ``delta`` the growth from the smaller ``d`` to the larger;
- ``plateau_length.png``: simulated medians with quartile bars, the predicted curves and
  ``delta_NN`` of the DMFT;
- ``delay_curves.png``: train and test loss against steps at three ``delta`` near the
  threshold (one seed, the smaller ``d``).

Run: ``python benchmarks/grokking_compare.py --sims A.json [B.json] --out DIR
[--delta-nn 2.63 --delta-nn-se 0.02] [--curve-deltas 3.2,3.8,5.6]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from dataclasses import replace

import numpy as np

import rmt
from rmt.app.plotting import grokking_figures, save_figure_atomic
from rmt.experiments.grokking import delay_curves, plateau_law, prediction_row


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", nargs="+", required=True, help="JSON files of grokking_plateau.py")
    p.add_argument("--out", required=True)
    p.add_argument("--delta-nn", type=float, default=None, help="default: rmt.dmft_delta_nn")
    p.add_argument("--delta-nn-se", type=float, default=None)
    p.add_argument("--curve-deltas", default="3.2,3.8,5.6")
    p.add_argument("--grid-points", type=int, default=12, help="deltas of the predicted curve")
    return p.parse_args(argv)


def load(paths):
    """Runs, summaries, the first file's settings and the budget of each ``d``."""
    runs, summary, settings, budgets = [], [], None, {}
    for path in paths:
        payload = json.loads(pathlib.Path(path).read_text())
        runs += payload["runs"]
        summary += payload["summary"]
        settings = settings or payload["settings"]
        for d in payload["settings"]["d"]:
            budgets[int(d)] = int(payload["settings"]["steps"])
    return runs, summary, settings, budgets


def main(argv=None):
    args = parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs, summary, settings, budgets = load(args.sims)
    # the censored marks of the figure sit at the least budget of the files (the budgets of
    # each d are listed under the table)
    budget = float(min(budgets.values()))
    cfg = rmt.RunConfig()
    sizes = sorted({int(s["d"]) for s in summary})
    deltas = sorted({float(s["delta"]) for s in summary})
    if args.delta_nn is None:
        res = rmt.dmft_delta_nn(cfg.model(), cfg.net(), 0.5, 64.0, **cfg.dmft_options())
        dnn, se = res.value, res.stderr
    else:
        dnn, se = args.delta_nn, args.delta_nn_se or 0.0
    grid = np.unique(np.round(np.geomspace(min(deltas), max(deltas), args.grid_points), 3))
    laws = plateau_law(cfg, sorted(set(grid) | set(deltas)), sizes)
    predicted = [prediction_row(law, d) for law in laws for d in sizes]
    at = {(p["d"], p["delta"]): p for p in predicted}
    lines = [
        "| d | delta | runs | censored | simulated median [q25, q75] | predicted | "
        "simulated / predicted | DMFT outlier, edge, overlap |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in sorted(summary, key=lambda s: (s["d"], s["delta"])):
        p = at[(int(s["d"]), float(s["delta"]))]
        med = "> budget" if s["median"] is None else f"{s['median']:.0f}"
        q = [("> budget" if v is None else f"{v:.0f}") for v in (s["q25"], s["q75"])]
        pred = p["predicted_steps"]
        ratio = f"{s['median'] / pred:.2f}" if pred and s["median"] is not None else "-"
        spec = f"{p['outlier']:.4f}, {p['edge']:.4f}, {p['overlap']:.2f}" if p["edge"] else "-"
        lines.append(
            f"| {s['d']} | {s['delta']:g} | {s['runs']} | {s['censored']} | {med} [{q[0]}, "
            f"{q[1]}] | {'-' if pred is None else f'{pred:.0f}'} | {ratio} | {spec} |"
        )
    if len(sizes) == 2:
        small, large = sizes
        lines += ["", f"| delta | simulated median, d = {large} / d = {small} | predicted |",
                  "|---|---|---|"]  # fmt: skip
        by = {(int(s["d"]), float(s["delta"])): s for s in summary}
        for x in deltas:
            a, b = by.get((small, x)), by.get((large, x))
            sim = (
                f"{b['median'] / a['median']:.2f}"
                if a and b and a["median"] and b["median"]
                else "-"
            )
            pa, pb = at[(small, x)]["predicted_steps"], at[(large, x)]["predicted_steps"]
            pred = f"{pb / pa:.2f}" if pa and pb else "-"
            lines.append(f"| {x:g} | {sim} | {pred} |")
    each = ", ".join(f"d = {d}: {b}" for d, b in sorted(budgets.items()))
    lines += ["", f"delta_NN (DMFT): {dnn:.3f} ± {se:.3f}; step budget {each}"]
    (out / "comparison.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    curve_cfg = replace(cfg, d=sizes[0], train_steps=budgets[sizes[0]])
    curve_deltas = [float(v) for v in args.curve_deltas.split(",")]
    curves = delay_curves(curve_cfg, curve_deltas, seed=0, after_escape=None)
    mark = {"delta": dnn, "interval": [dnn - 2 * se, dnn + 2 * se]} if se else dnn
    title = (
        f"phase retrieval, softplus/Huber, m = {cfg.width}, lr {cfg.lr:g}: the plateau of "
        "gradient descent"
    )
    figs = grokking_figures(summary, predicted, curves, mark, budget, title)
    for name, fig in figs.items():
        save_figure_atomic(fig, out / name)
    (out / "predicted.json").write_text(json.dumps(predicted, indent=2) + "\n")


if __name__ == "__main__":
    main()
