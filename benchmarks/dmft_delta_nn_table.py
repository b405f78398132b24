"""The asymptotic ``delta_NN`` over the rows of ``rmt threshold --point trained --table``.

For each configuration of ``rmt.experiments.learning.TRAINED_TABLE_CONFIGS`` (or those named
by ``--rows``): ``rmt.dmft_delta_nn`` with its defaults (lr 0.5, init_scale 0.01, as
``rmt.RunConfig``), and ``delta_pop`` and ``delta_alg`` from
``rmt.experiments.learning.reference_thresholds``.  One JSON line per row is appended to
``--out`` as soon as the row is done, so a row cut short by a time limit loses only itself.

Run: ``python benchmarks/dmft_delta_nn_table.py --out rows.jsonl [--rows 0 1 2]``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from _util import cpu_info

import rmt
from rmt.experiments.learning import TRAINED_TABLE_CONFIGS, reference_thresholds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=None)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}", flush=True)
    rows = range(len(TRAINED_TABLE_CONFIGS)) if args.rows is None else args.rows
    for i in rows:
        cfg = replace(rmt.RunConfig(), **TRAINED_TABLE_CONFIGS[i])
        t0 = time.perf_counter()
        res = rmt.dmft_delta_nn(cfg.model(), cfg.net(), lr=cfg.lr, init_scale=cfg.init_scale, rng=0)
        wall = time.perf_counter() - t0
        ref = reference_thresholds(cfg)
        row = {
            **TRAINED_TABLE_CONFIGS[i],
            "row": i,
            "converged": res.converged,
            "delta_nn": res.value if res.converged else None,
            "stderr": res.stderr if res.converged else None,
            "bracket": [res.lo, res.hi],
            "message": res.message,
            "evaluations": len(res.evaluations),
            "pilot_evaluations": len(res.pilot_evaluations),
            "wall_s": wall,
            "delta_pop": ref.delta_pop,
            "delta_alg": ref.delta_alg,
            "pop_reason": ref.reason,
            "cpu": info["model"],
        }
        text = (
            f"{res.value:.3f} ± {res.stderr:.3f}"
            if res.converged
            else f"not determined: {res.message}"
        )
        print(f"row {i} {TRAINED_TABLE_CONFIGS[i]}: delta_NN = {text} ({wall:.0f} s); "
              f"delta_pop {ref.delta_pop}, delta_alg {ref.delta_alg}", flush=True)  # fmt: skip
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
