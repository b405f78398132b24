"""PROTOTYPE (not used by ``rmt``): block products on packed row panels, for the block-of-8
goal of issue 15.  Run ``python benchmarks/proto_panel.py`` to compare it with the shipped
``simd_w4`` and a DGEMM in the same run.

Measured 2026-12-01 19:43 UTC, quiet (Xeon family 6 model 167, AVX-512, 2 threads, n = 16000,
d = 4000, m = 4, 8 vectors): ``simd_w4`` 244.5 ms (44% of the in-run DGEMM rate, 77 GFLOP/s),
this kernel with P = 48 or 96, TB = 64: 195-197 ms (54-55%), 1.25x faster; P = 24: no gain.
A second run at 19:50 (DGEMM 92 GFLOP/s): ``simd_w4`` 163.3 ms (54%), P = 48 139.8 ms (64%).
Of its 195 ms, 63 ms are the packing copy (``_pack``, scalar, 4-5 cycles an entry: it should
run at one pass over ``X``, about 28 ms); the micro-kernels are the FMA-bound ones of
``simd.py``.  Not integrated: still far from the 85% goal, and the packing must get fast first.

The design: the ``<L x double>`` micro-kernels of ``simd.py``, blocked over ``d`` so that the
block's columns stay in L1.

``simd.py`` streams whole rows of ``d``: for every step of ``R`` rows it reads all of ``Vtt``
(``d x C`` doubles) and reads and writes all of the accumulator (``d x C``) from L2 or L3.  At
``C = 32`` columns and ``d = 4000`` those are 1 MB each, for ``R = 6`` rows: the kernel moves
about 3 MB per 1.5 M FMA lanes, as much as the cache bandwidth gives, and ran at 58% of the
DGEMM rate on the Xeon of benchmarks/RESULTS.md.

Here ``P`` rows at a time are first *packed*: copied (widened, for a float32 ``X``) into a
float64 panel that stays in L2, each step of ``R`` rows stored column by column (``d x R``) so
that the ``R`` entries a micro-kernel broadcasts are adjacent.  Then, for each block of ``TB``
columns of ``d``:

* the dot products of every step of ``R`` rows of the panel with the block ``Vtt[t0:t1]``
  (``TB x C``, in L1) are added to the panel's ``U`` (:func:`dot_rows_acc`, the micro-kernel
  of ``simd.dot_rows`` started from ``U`` instead of 0);

and, after the contraction with the ``D_i`` of the panel's rows, for each block again the
updates ``acc[t0:t1] += sum_q X[q, t0:t1] Rr[q]`` (``simd.axpy_rows``, the block of ``acc`` in
L1).  ``Vtt`` and ``acc`` then cross the cache once per panel, not once per step: ``P / R``
times less traffic.  Rows are in the fixed chunks of ``hvp_fused``, summed in order.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from rmt.kernels.simd import (
    LANES,
    _contract,
    _empty64,
    _row_scratch,
    _step,
    _sum_chunks,
    _transposed_block,
    axpy_rows,
    dot_rows_acc,
)


@njit(inline="always")
def _pack(X, p0, steps, R, packed):
    """Rows ``p0 .. p0 + steps R - 1`` of ``X`` into ``packed`` (``steps x d x R``, float64):
    step ``k`` holds its ``R`` rows column by column, so that the ``R`` entries a column of the
    micro-kernel broadcasts are adjacent (one cache line) instead of a row stride apart."""
    d = X.shape[1]
    for k in range(steps):
        dst = packed[k]
        base = p0 + k * R
        for t in range(d):
            for q in range(R):
                dst[t, q] = X[base + q, t]


@njit(inline="always")
def _panel_product(X, D, Vt, n_chunks, R, W, L, P, TB):
    """``sum_i x_i r_i^T`` like ``hessian.hvp_fused``, on packed panels of ``P`` rows blocked
    by ``TB`` columns of ``d`` (``R``, ``W``, ``L`` compile-time constants; ``P`` a multiple
    of ``R``)."""
    n, d = X.shape
    m = D.shape[1]
    C = Vt.shape[0]
    Cp = L * W
    S = P // R
    Vtt = _transposed_block(Vt, d, Cp)
    partial = _empty64(n_chunks * d * Cp).reshape((n_chunks, d, Cp))
    chunk = (n + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        lo = ch * chunk
        hi = min(n, lo + chunk)
        acc = partial[ch]
        acc[:] = 0.0
        packed = _empty64(S * d * R).reshape((S, d, R))
        U = _empty64(P * Cp).reshape((P, Cp))
        Rr = _empty64(P * Cp).reshape((P, Cp))
        Rr[:] = 0.0
        U1 = _empty64(Cp).reshape((1, Cp))
        R1 = _empty64(Cp).reshape((1, Cp))
        R1[:] = 0.0
        Xs1 = _row_scratch(X, 1)
        p0 = lo
        while p0 + R <= hi:
            steps = min(S, (hi - p0) // R)
            npr = steps * R
            _pack(X, p0, steps, R, packed)
            U[:npr] = 0.0
            for t0 in range(0, d, TB):
                t1 = min(d, t0 + TB)
                Vb = Vtt[t0:t1]
                for k in range(steps):
                    Y = packed[k, t0:t1].T
                    dot_rows_acc(Y, 0, Vb, U[k * R : (k + 1) * R], R, W, L)
            _contract(U, D[p0 : p0 + npr], 0, npr, m, C, Rr)
            for t0 in range(0, d, TB):
                t1 = min(d, t0 + TB)
                Ab = acc[t0:t1]
                for k in range(steps):
                    Y = packed[k, t0:t1].T
                    axpy_rows(Y, 0, Rr[k * R : (k + 1) * R], Ab, R, W, L)
            p0 += npr
        while p0 < hi:  # the last rows of the chunk: the one-row step of simd._product
            _step(X, D, p0, 1, Xs1, Vtt, U1, R1, acc, m, C, 1, 1, W, L)
            p0 += 1
    return _sum_chunks(partial, C)


_TEMPLATE = """
@njit(cache=False, parallel=True)
def {name}(X, D, Vt, n_chunks):
    return _panel_product(X, D, Vt, n_chunks, {R}, {W}, {L}, {P}, {TB})
"""


def make_panel_kernel(R, W, L=LANES, P=48, TB=64):
    """A compiled panel kernel (prototype factory for benchmarking shapes)."""
    name = f"panel_r{R}_w{W}_l{L}_p{P}_tb{TB}"
    ns = {"njit": njit, "_panel_product": _panel_product}
    exec(_TEMPLATE.format(name=name, R=R, W=W, L=L, P=P, TB=TB), ns)
    return ns[name]


def main():
    import argparse
    import time

    from _util import cpu_info
    from threadpoolctl import threadpool_limits

    from rmt.kernels.simd import simd_w4

    p = argparse.ArgumentParser(description="packed-panel prototype against simd_w4 and DGEMM")
    p.add_argument("--n", type=int, default=16000)
    p.add_argument("--d", type=int, default=4000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    n, d, m = args.n, args.d, 4
    X = rng.standard_normal((n, d))
    D = rng.standard_normal((n, m, m))
    Vt = rng.standard_normal((32, d))
    A, B = rng.standard_normal((2000, 2000)), rng.standard_normal((2000, 2000))
    kernels = {"simd_w4 (shipped)": simd_w4}
    for P in (24, 48, 96):
        kernels[f"panel P={P} TB=64"] = make_panel_kernel(6, 4, 8, P, 64)
    ref = simd_w4(X, D, Vt, 8)
    for name, k in kernels.items():
        err = np.abs(k(X, D, Vt, 8) - ref).max() / np.abs(ref).max()
        assert err < 1e-12, (name, err)
    funcs = {name: (lambda k=k: k(X, D, Vt, 8)) for name, k in kernels.items()}
    cpu = cpu_info()
    with threadpool_limits(2):
        funcs["DGEMM 2000^3"] = lambda: A @ B
        times = {name: [] for name in funcs}
        for _ in range(args.repeats):
            for name, f in funcs.items():
                time.sleep(0.2)
                f()
                t0 = time.perf_counter()
                f()
                f()
                times[name].append((time.perf_counter() - t0) / 2)
    gemm = 2 * 2000**3 / np.median(times["DGEMM 2000^3"])
    print(f"CPU {cpu['model']}, {cpu['simd']}; n={n} d={d} m={m}, block of 8")
    for name, ts in times.items():
        t = float(np.median(ts))
        flops = 2 * 2000**3 if name.startswith("DGEMM") else 4 * n * d * 32
        print(f"  {name:22s} {t * 1e3:8.1f} ms  {flops / t / 1e9:6.1f} GFLOP/s  "
              f"{flops / t / gemm:5.0%} of DGEMM")  # fmt: skip


if __name__ == "__main__":
    main()
