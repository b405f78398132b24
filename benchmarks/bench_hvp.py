"""How fast is the fused Hessian-vector product?

Prints, measured side by side in one run (round-robin timing, see ``_util.py``):

* one product ``H v`` at ``n=16000, d=4000, m=4`` through ``Hessian.matvec`` (unrolled kernel),
  through the generic kernel, through the obvious numpy product (``X @ V``, a per-row einsum
  with ``D``, ``X.T @ R``) and through numpy's transposed products (``(V.T@X.T).T``, ``(R.T@X).T``);
* a block of 8 vectors in one call, against 8 single products; blocks of 2 and 8 through the
  dispatch (explicit-SIMD kernels, ``rmt/kernels/simd.py``) and through the unrolled kernel
  that served them before, in the same run (a block of 2 is the step of block Lanczos);
* a square DGEMM timed in the same run, the compute ceiling: the block's flop rate and the rate
  that the block goal (at most 3 single products) would need, as fractions of it;
* every time as a multiple of one pass over ``X``, both the nominal 30 GB/s of PERFORMANCE.md and
  a parallel sum of ``X`` timed in the same run;
* compile time, separately: first call in a fresh process with an empty Numba cache, first call
  in a fresh process that loads the cache, and a later call;
* the other processes' CPU load during the measurement (rerun while it is high);
* float32 storage of ``X``: the operator on the same draw with ``X`` stored as
  float32 against float64, single product, blocks of 2 and of 8, timed side by side in runs of
  ``--run`` consecutive calls (as a solver makes them), with the memory of ``X`` and the CPU
  model and SIMD width (goal: single product <= 0.6x float64).

* the SIMD paths (``--paths-only``): ``avx512``, ``avx2``, ``portable`` (and ``before``, the
  dispatch without AVX-512 that preceded the explicit-SIMD kernels) side by side, with the
  goals single <= 1.3 pass, block 2 <= 1.25 single, block 8 >= 85% of the in-run DGEMM rate;
  under ``benchmarks/emulate_avx2.py`` for AVX2 codegen on an AVX-512 machine.

Run: ``python benchmarks/bench_hvp.py [--threads 2] [--json benchmarks/results/hvp.json]``;
``--float32-only`` runs the float32 section alone, ``--paths-only [--paths avx2,portable]``
the SIMD paths alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from _kernels import stream_pass
from _util import (
    GEMM_N,
    GEMM_NAME,
    cpu_info,
    fmt_ms,
    measure,
    peak_share,
    set_threads,
    time_runs,
    wait_for_quiet,
)

import rmt
from rmt.kernels._generated.hvp_small import KERNELS as UNROLLED
from rmt.kernels.dispatch import TARGETS, default_target
from rmt.kernels.hessian import hvp_fused, hvp_kernel

NOMINAL_GBS = 30.0  # PERFORMANCE.md: numba reduction on 2 threads


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16000)
    p.add_argument("--d", type=int, default=4000)
    p.add_argument("--m", type=int, default=4)
    p.add_argument("--block", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--widths", default="1,2,3,4,6", help="widths of the sweep ('' to skip)")
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--max-tries", type=int, default=3, help="reruns while others' load is high")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a quiet machine")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--float32-only", action="store_true", help="only the float32 section")
    p.add_argument("--run", type=int, default=5, help="consecutive calls per timed run (float32)")
    p.add_argument("--paths-only", action="store_true", help="only the SIMD-path section")
    p.add_argument(
        "--paths",
        default="",
        help="SIMD paths to compare (default: all runnable), "
        "'before' for the earlier dispatch without AVX-512 (hvp_m4 throughout)",
    )
    return p.parse_args(argv)


def make_hessian(n, d, m, rng):
    """A Hessian at a random point of a noisy ``z1 z2`` model (tanh network, square loss)."""
    data = rmt.MultiIndexModel("z1z2", noise=0.1).sample(n, d, rng)
    net = rmt.TwoLayerNet(m, activation="tanh", loss="square")
    W = rng.standard_normal((d, m)) / np.sqrt(d)
    return rmt.Hessian(net, data, W, weight_decay=1e-3)


def numpy_obvious(X, D, V):
    """The obvious product for ``V`` (``d x m``): ``X @ V``, einsum with ``D``, ``X.T @ R``."""
    U = X @ V
    R = np.einsum("ij,ijk->ik", U, D)
    return X.T @ R


def numpy_transposed(X, D, V):
    """The same with the transposed BLAS calls of PERFORMANCE.md: ``(V.T@X.T).T``, ``(R.T@X).T``."""
    U = (V.T @ X.T).T
    R = np.einsum("ij,ijk->ik", U, D)
    return (R.T @ X).T


def contenders(H, b, rng):
    """The timed callables, each called once here (compilation, first-touch)."""
    X, D, m, d = H.data.X, H.D, H.m, H.d
    v = rng.standard_normal(m * d)
    Vb = rng.standard_normal((m * d, b))
    Vdm = np.ascontiguousarray(v.reshape(m, d).T)
    Vt1 = np.ascontiguousarray(v.reshape(m, d))
    Vtb = np.ascontiguousarray(Vb.T).reshape(b * m, d)
    V2 = rng.standard_normal((m * d, 2))
    Vt2 = np.ascontiguousarray(V2.T).reshape(2 * m, d)
    nc = H.n_chunks
    unrolled = UNROLLED.get(m, hvp_fused)
    G = rng.standard_normal((GEMM_N, GEMM_N))
    funcs = {
        "numpy obvious, 1 vector": lambda: numpy_obvious(X, D, Vdm),
        "numpy transposed, 1 vector": lambda: numpy_transposed(X, D, Vdm),
        "one pass over X (parallel sum)": lambda: stream_pass(X),
        "rmt Hessian.matvec, 1 vector": lambda: H.matvec(v),
        "generic kernel, 1 vector": lambda: hvp_fused(X, D, Vt1, nc),
        f"rmt Hessian.matmat, block {b}": lambda: H.matmat(Vb),
        f"unrolled kernel, block {b}": lambda: unrolled(X, D, Vtb, nc),
        f"generic kernel, block {b}": lambda: hvp_fused(X, D, Vtb, nc),
        "rmt Hessian.matmat, block 2": lambda: H.matmat(V2),
        "unrolled kernel, block 2": lambda: unrolled(X, D, Vt2, nc),
        GEMM_NAME: lambda: G @ G,
    }
    ref = numpy_obvious(X, D, Vdm).T.ravel() / H.n + H.weight_decay * v
    err = np.abs(H.matvec(v) - ref).max() / np.abs(ref).max()
    for f in funcs.values():
        f()
    return funcs, err


def main_timings(H, args, rng):
    funcs, err = contenders(H, args.block, rng)
    if args.wait:
        wait_for_quiet(timeout=args.wait)
    timings, load, tries = measure(funcs, repeats=args.repeats, max_tries=args.max_tries)
    t = {k: v["median"] for k, v in timings.items()}
    nominal = H.data.X.nbytes / (NOMINAL_GBS * 1e9)
    measured = t["one pass over X (parallel sum)"]
    base = t["numpy obvious, 1 vector"]
    print(f"\nn={H.n} d={H.d} m={H.m}; kernel for m={H.m}: {hvp_kernel(H.m).__name__}")
    print(f"max relative difference, Hessian.matvec vs numpy: {err:.1e}")
    print(f"other processes' load: {load:.2f} cores (try {tries}); median of {args.repeats}")
    print(f"one-pass bound: nominal {fmt_ms(nominal)} (30 GB/s), measured {fmt_ms(measured)}")
    print(f"{'':34s} {'time':>10s} {'/numpy':>7s} {'/bound':>7s} {'/measured pass':>15s}")
    for name, sec in t.items():
        print(
            f"{name:34s} {fmt_ms(sec)} {sec / base:7.3f} {sec / nominal:7.2f} "
            f"{sec / measured:15.2f}"
        )
    single = t["rmt Hessian.matvec, 1 vector"]
    block = t[f"rmt Hessian.matmat, block {args.block}"]
    block2 = t["rmt Hessian.matmat, block 2"]
    print(f"\nsingle product / numpy obvious: {single / base:.3f}  (goal <= 0.3)")
    print(f"block {args.block} / single product: {block / single:.2f}  (goal <= 3)")
    print(
        f"block 2 / single product: {block2 / single:.2f} with {hvp_kernel(H.m, 2 * H.m).__name__}"
        f", {t['unrolled kernel, block 2'] / single:.2f} with the unrolled kernel"
    )
    print(f"single product / one-pass bound: {single / nominal:.2f}  (goal <= 2)")
    # every product does 4 n d m flops per vector (x^T V, then x r^T); the block goal asks
    # for b vectors in at most 3 single products
    gemm_rate = 2 * GEMM_N**3 / t[GEMM_NAME]
    flops = 4 * H.n * H.d * H.m * args.block
    need = flops / (3 * single)
    print(
        f"DGEMM rate in this run: {gemm_rate / 1e9:.0f} GFLOP/s; block {args.block} runs at "
        f"{flops / block / 1e9:.0f} GFLOP/s ({flops / block / gemm_rate:.0%} of it); "
        f"block <= 3 single products needs {need / 1e9:.0f} GFLOP/s ({need / gemm_rate:.0%})"
    )
    return {
        "times": t,
        "other_load": load,
        "tries": tries,
        "bound_nominal": nominal,
        "rel_err": err,
        "single_over_numpy": single / base,
        "block_over_single": block / single,
        "block2_over_single": block2 / single,
        "gemm_gflops": gemm_rate / 1e9,
        "block_gflops": flops / block / 1e9,
        "block_goal_needs_gflops": need / 1e9,
    }


def sweep_one(m, args, rng):
    """Median times of one product at width ``m``: dispatch, generic kernel, numpy transposed."""
    H = make_hessian(args.n, args.d, m, rng)
    X, D, nc = H.data.X, H.D, H.n_chunks
    Vt = rng.standard_normal((m, args.d))
    Vdm = np.ascontiguousarray(Vt.T)
    kernel = hvp_kernel(m)
    funcs = {
        "dispatch": lambda: kernel(X, D, Vt, nc),
        "generic": lambda: hvp_fused(X, D, Vt, nc),
        "numpy T": lambda: numpy_transposed(X, D, Vdm),
    }
    for f in funcs.values():
        f()
    timings, load, _ = measure(funcs, repeats=max(3, args.repeats // 2), max_tries=args.max_tries)
    return {
        "kernel": kernel.__name__,
        "other_load": load,
        **{k: v["median"] for k, v in timings.items()},
    }


def width_sweep(args, rng):
    """One product per width: unrolled kernel (where there is one), generic kernel, numpy."""
    widths = [int(w) for w in args.widths.split(",") if w.strip()]
    rows = {}
    if widths:
        print(f"\nwidth sweep, one vector, median of {max(3, args.repeats // 2)}:")
        print(f"{'m':>3s} {'kernel':>8s} {'dispatch':>10s} {'generic':>10s} {'numpy T':>10s} load")
    for m in widths:
        r = rows[m] = sweep_one(m, args, rng)
        print(
            f"{m:3d} {r['kernel']:>8s} {fmt_ms(r['dispatch'])} {fmt_ms(r['generic'])} "
            f"{fmt_ms(r['numpy T'])} {r['other_load']:.2f}"
        )
    return rows


COMPILE_SNIPPET = """
import json, time, numpy as np
t0 = time.perf_counter()
from rmt.kernels.hessian import hvp_fused, hvp_kernel
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
m = {m}
X = rng.standard_normal((64, 32)); D = rng.standard_normal((64, m, m)); Vt = rng.standard_normal((m, 32))
out = {{"import": t_import}}
Vt2 = rng.standard_normal((2 * m, 32))
for name, k, V in (("unrolled", hvp_kernel(m), Vt), ("generic", hvp_fused, Vt),
                   ("simd block 2", hvp_kernel(m, 2 * m), Vt2)):
    t0 = time.perf_counter(); k(X, D, V, 2); t1 = time.perf_counter(); k(X, D, V, 2)
    out[name] = [t1 - t0, time.perf_counter() - t1]
print(json.dumps(out))
"""


def compile_times(m, threads):
    """First call with an empty cache, first call loading the cache, later call (fresh processes)."""
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads))
    code = COMPILE_SNIPPET.format(m=m)
    results = {}
    with tempfile.TemporaryDirectory() as cache:
        for label in ("empty cache", "cache loaded"):
            env["NUMBA_CACHE_DIR"] = cache
            out = subprocess.run(
                [sys.executable, "-c", code],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            results[label] = json.loads(out.strip().splitlines()[-1])
    print(f"\ncompile time, m={m}, fresh processes (first call / later call, tiny problem):")
    for label, r in results.items():
        parts = ", ".join(
            f"{k} {r[k][0]:.2f} s / {1e3 * r[k][1]:.2f} ms"
            for k in ("unrolled", "generic", "simd block 2")
        )
        print(f"  {label:13s}: {parts}; import {1e3 * r['import']:.0f} ms")
    return results


def float32_timings(args, rng):
    """float32 storage of ``X`` against float64 on the same draw: single product, blocks of
    2 and 8, one pass over each ``X``; ratios float32 / float64 from one run."""
    from _util import LoadMeter

    model = rmt.MultiIndexModel("z1z2", noise=0.1)
    net = rmt.TwoLayerNet(args.m, activation="tanh", loss="square")
    W = rng.standard_normal((args.d, args.m)) / np.sqrt(args.d)
    H = {}
    for dt in (np.float64, np.float32):
        data = model.sample(args.n, args.d, rng=args.seed, dtype=dt)
        H[np.dtype(dt).name] = rmt.Hessian(net, data, W, weight_decay=1e-3)
    V = {b: rng.standard_normal((H["float64"].shape[0], b)) for b in (1, 2, 8)}
    G = rng.standard_normal((GEMM_N, GEMM_N))
    funcs = {"dgemm": lambda: G @ G}
    for name, op in H.items():
        funcs[f"one pass over X, {name}"] = lambda op=op: stream_pass(op.data.X)
        for b in (1, 2, 8):
            funcs[f"{name}, block {b}"] = lambda op=op, b=b: op.matmat(V[b])
    for f in funcs.values():
        f()
    ref = H["float64"].matmat(V[8])
    err = np.abs(H["float32"].matmat(V[8]) - ref).max() / np.abs(ref).max()
    with LoadMeter() as meter:
        t = time_runs(funcs, args.run, args.repeats)
    cpu = cpu_info()
    print(f"\nfloat32 storage of X: n={args.n} d={args.d} m={args.m}; CPU {cpu['model']}, "
          f"{cpu['simd']}; other processes' load {meter.other_load:.2f} cores")  # fmt: skip
    for name, op in H.items():
        print(f"  X {name}: {op.data.X.nbytes / 2**20:.0f} MiB")
    print(f"  max relative difference float32 vs float64 operator (same draw): {err:.1e}")
    print(f"  median per call over runs of {args.run} consecutive calls, {args.repeats} runs:")
    print(f"  {'':14s} {'float64':>10s} {'float32':>10s} {'f32/f64':>8s} kernel")
    rows = {}
    for label in ("one pass over X", "block 1", "block 2", "block 8"):
        key = (lambda nm: f"{label}, {nm}") if label.startswith("one") else (
            lambda nm: f"{nm}, {label}")  # fmt: skip
        t64, t32 = t[key("float64")], t[key("float32")]
        b = 0 if label.startswith("one") else int(label.split()[1])
        kern = "stream_pass"
        if b:  # the float32 rows may run another kernel (hvp_kernel's dtype)
            k64, k32 = (hvp_kernel(args.m, b * args.m, dtype=dt) for dt in (np.float64, np.float32))
            kern = k64.__name__ if k64 is k32 else f"{k64.__name__} / {k32.__name__}"
        rows[label] = {"float64": t64, "float32": t32, "ratio": t32 / t64, "kernel": kern}
        print(f"  {label:14s} {fmt_ms(t64)} {fmt_ms(t32)} {t32 / t64:8.2f} {kern}")
    print(f"single product float32 / float64: {rows['block 1']['ratio']:.2f}  (goal <= 0.6)")
    # the float32 product does the float64 product's arithmetic: its floor is the DGEMM rate
    gemm = 2 * GEMM_N**3 / t["dgemm"]
    flops1 = 4 * args.n * args.d * args.m
    t64, pass64 = rows["block 1"]["float64"], rows["one pass over X"]["float64"]
    needs = {
        "float32": peak_share(flops1, 0.6 * t64, gemm),
        "float32_with_single": peak_share(flops1, 0.6 * 1.3 * pass64, gemm),
        "float32_measured": peak_share(flops1, rows["block 1"]["float32"], gemm),
    }
    print(f"  DGEMM {gemm / 1e9:.0f} GFLOP/s; share of it the float32 goal needs: "
          f"{needs['float32']:.0%} (runs at {needs['float32_measured']:.0%}), "
          f"{needs['float32_with_single']:.0%} with the float64 single at 1.3 passes")  # fmt: skip
    return {"cpu": cpu, "other_load": meter.other_load, "rel_err": err, "rows": rows,
            "x_bytes": {k: op.data.X.nbytes for k, op in H.items()},
            "gemm_gflops": gemm / 1e9, "needs": needs}  # fmt: skip


def runnable_paths() -> list[str]:
    """The SIMD paths this process can run: the dispatched one first, then the narrower ones
    (``avx512`` only where Numba compiles for AVX-512)."""
    order = list(TARGETS)
    return [t for t in order if order.index(t) >= order.index(default_target())]


def path_timings(args, rng):
    """Each SIMD path (``rmt.kernels.dispatch.TARGETS``) side by side in one run: single product,
    blocks of 2 and 8 through ``hvp_kernel(m, b*m, target)``, one pass over ``X`` and a DGEMM,
    in runs of ``--run`` consecutive calls; prints the speed goals per path."""
    from _util import LoadMeter

    H = make_hessian(args.n, args.d, args.m, rng)
    X, D, nc, m, d = H.data.X, H.D, H.n_chunks, H.m, H.d
    paths = [p for p in args.paths.split(",") if p] or runnable_paths()
    Vt = {b: rng.standard_normal((b * m, d)) for b in (1, 2, 8)}
    G = rng.standard_normal((GEMM_N, GEMM_N))
    funcs = {"pass": lambda: stream_pass(X), "dgemm": lambda: G @ G}
    kernels = {}
    for p in paths:  # "before": the earlier dispatch of a CPU without AVX-512
        for b in (1, 2, 8):
            k = kernels[p, b] = (
                UNROLLED.get(m, hvp_fused) if p == "before" else hvp_kernel(m, b * m, p)
            )
            funcs[f"{p} b{b}"] = lambda k=k, b=b: k(X, D, Vt[b], nc)
        streamed = UNROLLED.get(m, hvp_fused) if p == "before" else hvp_kernel(m, 8 * m, p)
        if streamed is not kernels[p, 8]:  # a panel kernel: the streaming one beside it
            kernels[p, "streamed"] = streamed
            funcs[f"{p} b8 streamed"] = lambda k=streamed: k(X, D, Vt[8], nc)
    compile_s = {}
    for name, f in funcs.items():
        t0 = time.perf_counter()
        f()
        compile_s[name] = time.perf_counter() - t0
    ref = {b: numpy_product_t(X, D, Vt[b]) for b in (1, 2, 8)}
    errs = {
        (p, b): float(np.abs(kernels[p, b](X, D, Vt[b], nc) - ref[b]).max() / np.abs(ref[b]).max())
        for p in paths
        for b in (1, 2, 8)
    }
    with LoadMeter() as meter:
        t = time_runs(funcs, args.run, args.repeats)
    cpu = cpu_info()
    gemm = 2 * GEMM_N**3 / t["dgemm"]
    print(f"\nSIMD paths: n={args.n} d={d} m={m}; CPU {cpu['model']}, {cpu['simd']}; Numba "
          f"compiles for {default_target()} (NUMBA_CPU_NAME={os.environ.get('NUMBA_CPU_NAME', '')!r}"
          f"); load {meter.other_load:.2f} cores; uptime: {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"  pass {fmt_ms(t['pass'])}, DGEMM {gemm / 1e9:.0f} GFLOP/s; median per call over "
          f"{args.repeats} runs of {args.run}")  # fmt: skip
    rows = {}
    for p in paths:
        t1, t2, t8 = (t[f"{p} b{b}"] for b in (1, 2, 8))
        share = 4 * H.n * d * m * 8 / t8 / gemm
        rows[p] = {"single": t1, "block2": t2, "block8": t8, "single_over_pass": t1 / t["pass"],
                   "block2_over_single": t2 / t1, "block8_dgemm_share": share,
                   "kernels": [kernels[p, b].__name__ for b in (1, 2, 8)],
                   "max_rel_err": max(errs[p, b] for b in (1, 2, 8))}  # fmt: skip
        if (p, "streamed") in kernels:
            ts = t[f"{p} b8 streamed"]
            r = rows[p]
            r["block8_streamed"] = {"kernel": kernels[p, "streamed"].__name__, "time": ts,
                                    "dgemm_share": 4 * H.n * d * m * 8 / ts / gemm}  # fmt: skip
        r = rows[p]
        print(f"  {p:9s} {' / '.join(r['kernels'])}: single {fmt_ms(t1)} = "
              f"{r['single_over_pass']:.2f} pass (goal <= 1.3); block 2 {fmt_ms(t2)} = "
              f"{r['block2_over_single']:.2f} single (<= 1.25); block 8 {fmt_ms(t8)} = "
              f"{share:.0%} of DGEMM (>= 85%); max rel err {r['max_rel_err']:.1e}")  # fmt: skip
        if "block8_streamed" in r:
            st = r["block8_streamed"]
            print(
                f"  {'':9s} block 8 streamed by {st['kernel']}: {fmt_ms(st['time'])} = "
                f"{st['dgemm_share']:.0%} of DGEMM; panels {st['time'] / t8:.2f}x faster"
            )
        r["needs"] = goal_needs(4 * H.n * d * m, t["pass"], t1, gemm)
        print(f"  {'':9s} {needs_line(r['needs'])}")
    print("  first calls (compile or cache load, s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in compile_s.items()))  # fmt: skip
    return {"cpu": cpu, "target": default_target(), "other_load": meter.other_load, "times": t,
            "gemm_gflops": gemm / 1e9, "rows": rows, "first_call_s": compile_s}  # fmt: skip


def goal_needs(flops1, t_pass, t_single, gemm):
    """The share of the in-run DGEMM rate (the FMA peak) that each product speed goal
    takes, from the goal's time allowance and the flops of one vector (``4 n d m``): the
    single product in 1.3 passes; a block of 2 in 1.25 of the measured single product, and in
    1.25 x 1.3 passes (both goals met at once); the block of 8 at 85%. Above 100%, no kernel
    meets the goal in this run."""
    return {
        "single": peak_share(flops1, 1.3 * t_pass, gemm),
        "block2": peak_share(2 * flops1, 1.25 * t_single, gemm),
        "block2_with_single": peak_share(2 * flops1, 1.25 * 1.3 * t_pass, gemm),
        "single_measured": peak_share(flops1, t_single, gemm),
    }


def needs_line(n):
    return (
        f"share of the DGEMM rate each goal needs: single {n['single']:.0%} while streaming "
        f"(runs at {n['single_measured']:.0%}); block 2 {n['block2']:.0%}, "
        f"{n['block2_with_single']:.0%} with the single at its goal; block 8 85%"
    )


def numpy_product_t(X, D, Vt):
    """``sum_i x_i r_i^T`` (``b*m x d``) by numpy, the reference of the path section."""
    m = D.shape[1]
    out = np.empty_like(Vt)
    for c in range(Vt.shape[0] // m):
        R = np.einsum("ij,ijk->ik", (Vt[c * m : (c + 1) * m] @ X.T).T, D)
        out[c * m : (c + 1) * m] = R.T @ X
    return out


def main(argv=None):
    args = parse_args(argv)
    settings = rmt.configure_threads()  # before the first parallel kernel (rmt/kernels/threads.py)
    threads = set_threads(args.threads)
    print(f"thread environment set: {settings.applied or 'nothing'} (kept: {settings.kept})")
    print(f"threads: numba {threads['numba']}, BLAS {threads['blas']}")
    rng = np.random.default_rng(args.seed)
    report = {
        "args": vars(args),
        "threads": {"numba": threads["numba"], "blas": threads["blas"]},
    }
    if args.paths_only:
        report["paths"] = path_timings(args, rng)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1, default=str)
        return
    if not args.float32_only:
        H = make_hessian(args.n, args.d, args.m, rng)
        report["main"] = main_timings(H, args, rng)
        del H
    report["float32"] = float32_timings(args, rng)
    if not args.float32_only:
        report["sweep"] = width_sweep(args, rng)
        report["compile"] = compile_times(args.m, args.threads)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
