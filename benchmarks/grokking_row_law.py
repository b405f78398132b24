"""The plateau length from the ``Theta*`` row along the DMFT (docs/theory.md 7.8) against
gradient descent.

For each ``delta`` (with its own horizon of steps) ``rmt.experiments.grokking.row_escape``
solves the DMFT with the ``Theta*`` row and gives the median and quartiles over runs of the
plateau length at each ``d``; each ``delta`` is written to ``row_<delta>.json`` as it finishes
(a rerun skips the deltas already there). Then the medians and quartiles of the runs of
``benchmarks/grokking_plateau.py`` (``--sims``) are set beside them in ``comparison.md`` and
``plateau_row_law.png``, with ``MANIFEST.md``.

Run: ``python benchmarks/grokking_row_law.py --steps 2.9:1200 3.2:1200 3.8:800 4.6:400
--sizes 250 1000 4000 --sims A.json B.json --out DIR [--replicas 2 --draws 2500]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from dataclasses import asdict, replace

import numpy as np
from _util import cpu_info

import rmt
from rmt.app.plotting import (
    figure_legend,
    new_figure,
    plot_plateau_lengths,
    save_figure_atomic,
    set_title,
)
from rmt.experiments.grokking import ROW_QUANTILES, RowEscape, row_columns, row_escape


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", nargs="+", required=True, help="DELTA:STEPS, one per delta")
    p.add_argument("--sizes", nargs="+", type=int, default=[250, 1000, 4000])
    p.add_argument("--sims", nargs="*", default=[], help="JSON files of grokking_plateau.py")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--draws", type=int, default=2500)
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def _fmt(value):
    return "-" if value is None else f"{value:.0f}"


def _finite(x):
    return None if not np.isfinite(x) else float(x)


def simulated(summary, d, delta):
    for s in summary:
        if int(s["d"]) == d and abs(float(s["delta"]) - delta) < 1e-9:
            return s
    return None


def main(argv=None):
    args = parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = replace(rmt.RunConfig(), dmft_samples=args.draws)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows, timings = {}, {}
    for item in args.steps:
        delta, steps = float(item.split(":")[0]), int(item.split(":")[1])
        path = out / f"row_{delta:g}.json"
        if path.exists():
            payload = json.loads(path.read_text())
        else:
            t0 = time.perf_counter()
            row = row_escape(cfg, delta, args.sizes, steps=steps, replicas=args.replicas)
            payload = {**asdict(row), "seconds": time.perf_counter() - t0}
            payload["escape"] = [{str(d): v for d, v in e.items()} for e in payload["escape"]]
            path.write_text(json.dumps(payload, indent=1) + "\n")
        escape = tuple({int(d): v for d, v in e.items()} for e in payload["escape"])
        rows[delta] = RowEscape(
            delta=delta, steps=payload["steps"], t1=tuple(payload["t1"]), escape=escape,
            reasons=tuple(payload["reasons"]),
        )  # fmt: skip
        timings[delta] = payload["seconds"]
        print(f"delta {delta:g}: t1 {payload['t1']}, {payload['seconds']:.0f} s", flush=True)
    summary, runs = [], []
    for f in args.sims:
        payload = json.loads(pathlib.Path(f).read_text())
        summary += payload["summary"]
        runs += payload["runs"]
    predicted = [
        {"d": d, "delta": delta, "predicted_steps": None, **row_columns(rows[delta], d)}
        for delta in sorted(rows)
        for d in args.sizes
    ]
    lines = [
        "| delta | d | horizon | predicted median [q25, q75] | GD median [q25, q75] "
        "(runs, beyond the budget) | GD / predicted median | escape step: predicted median, "
        "GD median | missing |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in predicted:
        s = simulated(summary, p["d"], p["delta"])
        gd, ratio = "not run", "-"
        if s is not None:
            gd = (
                f"{_fmt(s['median'])} [{_fmt(s['q25'])}, {_fmt(s['q75'])}] "
                f"({s['runs']}, {s['censored']})"
            )
            if s["median"] is not None and p["row_median"]:
                ratio = f"{s['median'] / p['row_median']:.2f}"
        pred = f"{_fmt(p['row_median'])} [{_fmt(p['row_q25'])}, {_fmt(p['row_q75'])}]"
        t1 = rows[p["delta"]].t1
        esc_pred = None if p["row_median"] is None else p["row_median"] + float(np.mean(t1))
        ends = [
            np.inf if r["escape_step"] is None else r["escape_step"]
            for r in runs
            if int(r["d"]) == p["d"] and abs(float(r["delta"]) - p["delta"]) < 1e-9
        ]
        esc_gd = "-" if not ends else _fmt(_finite(np.median(ends)))
        lines.append(
            f"| {p['delta']:g} | {p['d']} | {rows[p['delta']].steps} | {pred} | {gd} | {ratio} "
            f"| {_fmt(esc_pred)}, {esc_gd} | {p['row_reason']} |"
        )
    table = "\n".join(lines) + "\n"
    (out / "comparison.md").write_text(table)
    print(table)
    fig, axes = new_figure(1, 1, width=6.6, height=4.4)
    plot_plateau_lengths(axes[0][0], summary, predicted, legend=False)
    figure_legend(fig, axes, ncols=2)
    set_title(fig, "phase retrieval, softplus/Huber, m = 2: GD and the Theta* row (7.8)")
    save_figure_atomic(fig, out / "plateau_row_law.png")
    cpu = cpu_info()
    manifest = [
        "# The plateau length from the Theta* row along the DMFT, against gradient descent",
        "",
        f"Command: `python {' '.join(sys.argv)}`",
        f"Started: {started}; CPU: {cpu['model']}, {cpu['simd']}, {os.cpu_count()} vCPUs.",
        "Setting: phase retrieval, softplus/Huber, m = 2, lr 0.5, init 0.01 (`rmt.RunConfig()`);"
        f" DMFT {args.replicas} replicas of {args.draws} draws; quantiles over runs "
        f"{ROW_QUANTILES}; escape at overlap 0.5.",
        "Seconds per delta: " + ", ".join(f"{k:g}: {v:.0f}" for k, v in sorted(timings.items())),
        "GD runs: " + (", ".join(args.sims) or "none"),
        "",
        "Files: `row_<delta>.json` (t1 and the escape steps of each replica, at each d and "
        "quantile; null: later than the horizon), `comparison.md`, `plateau_row_law.png`.",
    ]
    (out / "MANIFEST.md").write_text("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
