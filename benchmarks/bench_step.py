"""How long is one gradient-descent step, in passes over ``X``? (goal: <= 1.3 passes)

Prints, measured side by side in one run, at ``n=16000, d=4000`` for ``m = 4`` and ``m = 2``:

* one pass over ``X`` (a parallel streaming sum, as ``bench_hvp.py`` times it);
* one step of ``rmt.gradient_descent``: the fused loss-and-gradient kernel (unrolled for
  ``m <= 4``, and the generic kernel for comparison), and the step with the test loss (one more
  forward pass over a held-out ``X`` of the same size, so its floor is two passes);
* each contender timed in runs of ``--run`` consecutive calls, as the trainer makes them (a
  kernel that follows a different one inherits its cache state), round-robin over contenders,
  median per call over ``--repeats`` runs; the other processes' load during the measurement;
* the CPU model and its SIMD width, and the compile time apart from the run time (fresh
  processes: empty Numba cache, then the cache loaded).

Run: ``python benchmarks/bench_step.py [--threads 2] [--json benchmarks/results/bench_step.json]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from _util import (
    GEMM_N,
    GEMM_NAME,
    LoadMeter,
    cpu_info,
    fmt_ms,
    peak_share,
    set_threads,
    time_runs,
)

import rmt
from rmt.kernels.descent import step_candidates, step_kernels
from rmt.kernels.hessian import default_chunks

try:
    from _kernels import stream_pass
except ImportError:  # pragma: no cover - older layout
    from rmt.kernels.hessian import stream_pass


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16000)
    p.add_argument("--d", type=int, default=4000)
    p.add_argument("--widths", default="4,2")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--run", type=int, default=5, help="consecutive calls per timed run")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument(
        "--json",
        default=os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "results", "bench_step.json"
        ),
        help="where to write the JSON (default: results/bench_step.json beside this script)",
    )
    return p.parse_args(argv)


def contenders(n, d, m, rng):
    data = rmt.MultiIndexModel("phase_retrieval").sample(n, d, rng)
    X_test = rng.standard_normal((n, d))
    net = rmt.TwoLayerNet(m, activation="softplus", loss="huber")
    Wt = rng.standard_normal((m, d)) / np.sqrt(d)
    args = (data.y, net.a, net.act_code, net.loss_code, net.huber_delta, default_chunks())
    grad_k, loss_k = step_kernels(m)
    grad_g, _ = step_kernels(m, unrolled=False)
    G = rng.standard_normal((GEMM_N, GEMM_N))
    funcs = {
        "one pass over X (parallel sum)": lambda: stream_pass(data.X),
        GEMM_NAME: lambda: G @ G,
        f"step, {grad_k.__name__}": lambda: grad_k(data.X, Wt, *args),
    }
    for other in step_candidates(m):  # the other paths' kernels, side by side
        if other is not grad_k:
            funcs[f"other: {other.__name__}"] = functools.partial(other, data.X, Wt, *args)
    funcs |= {
        f"step, generic {grad_g.__name__}": lambda: grad_g(data.X, Wt, *args),
        "step + test loss (2 passes)": lambda: (
            grad_k(data.X, Wt, *args),
            loss_k(X_test, Wt, *args),
        ),
        f"test loss alone, {loss_k.__name__}": lambda: loss_k(X_test, Wt, *args),
    }
    for f in funcs.values():
        f()
    return funcs


def measure_width(args, m, rng) -> dict:
    funcs = contenders(args.n, args.d, m, rng)
    with LoadMeter() as meter:
        t = time_runs(funcs, args.run, args.repeats)
    one = t["one pass over X (parallel sum)"]
    print(f"\nm={m}: median per call, runs of {args.run}; other load {meter.other_load:.2f} cores")
    print(f"{'':34s} {'time':>10s} {'/ one pass':>11s}")
    for name, sec in t.items():
        print(f"{name:34s} {fmt_ms(sec)} {sec / one:11.2f}")
    step = next(v for k, v in t.items() if k.startswith("step, ") and "generic" not in k)
    print(f"step / one pass: {step / one:.2f}  (goal <= 1.3)")
    # a step does 4 n d m flops (the m dots of each row, then its m updates of the gradient)
    gemm = 2 * GEMM_N**3 / t[GEMM_NAME]
    flops = 4 * args.n * args.d * m
    need, runs = peak_share(flops, 1.3 * one, gemm), peak_share(flops, step, gemm)
    print(f"DGEMM {gemm / 1e9:.0f} GFLOP/s; the goal needs {need:.0%} of it while streaming "
          f"(the step runs at {runs:.0%})")  # fmt: skip
    return {"times": t, "other_load": meter.other_load, "step_over_pass": step / one,
            "gemm_gflops": gemm / 1e9, "goal_needs_dgemm_share": need}  # fmt: skip


COMPILE_SNIPPET = """
import json, time, numpy as np
t0 = time.perf_counter()
from rmt.kernels.descent import step_kernels
t_import = time.perf_counter() - t0
m = {m}
rng = np.random.default_rng(0)
X = rng.standard_normal((64, 32)); y = rng.standard_normal(64); Wt = rng.standard_normal((m, 32))
a = np.full(m, 1.0 / m)
out = {{"import": t_import}}
for name, k in zip(("grad", "loss"), step_kernels(m)):
    t0 = time.perf_counter(); k(X, Wt, y, a, 3, 2, 1.0, 8); t1 = time.perf_counter()
    k(X, Wt, y, a, 3, 2, 1.0, 8)
    out[name] = [t1 - t0, time.perf_counter() - t1]
print(json.dumps(out))
"""


def compile_times(m, threads) -> dict:
    """First call in a fresh process with an empty Numba cache, then with the cache loaded."""
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads))
    results = {}
    with tempfile.TemporaryDirectory() as cache:
        env["NUMBA_CACHE_DIR"] = cache
        for label in ("empty cache", "cache loaded"):
            out = subprocess.run(
                [sys.executable, "-c", COMPILE_SNIPPET.format(m=m)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            results[label] = json.loads(out.strip().splitlines()[-1])
    print(f"\ncompile time, m={m} (first call / later call, tiny problem, fresh processes):")
    for label, r in results.items():
        print(
            f"  {label:13s}: grad {r['grad'][0]:.2f} s / {1e3 * r['grad'][1]:.2f} ms, "
            f"loss {r['loss'][0]:.2f} s / {1e3 * r['loss'][1]:.2f} ms"
        )
    return results


def main(argv=None):
    args = parse_args(argv)
    threads = set_threads(args.threads)
    cpu = cpu_info()
    print(f"CPU: {cpu['model']}; SIMD: {cpu['simd']}; threads: numba {threads['numba']}")
    print(f"n={args.n} d={args.d}; X is {args.n * args.d * 8 / 1e6:.0f} MB")
    rng = np.random.default_rng(args.seed)
    widths = [int(w) for w in args.widths.split(",") if w.strip()]
    report = {"args": vars(args), "cpu": cpu, "threads": threads["numba"], "widths": {}}
    for m in widths:
        report["widths"][m] = measure_width(args, m, rng)
    report["compile"] = compile_times(widths[0], args.threads)
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
