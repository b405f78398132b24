"""DMFT responses: reverse mode (``rmt.kernels.dmft``) against the stored forward form, same run.

A DMFT solve (``rmt.dmft_gd``) spends most of its time on the per-sample responses
``G(t, s) = d r^t / d eta^s`` of docs/theory.md (D2): ``N m^3 T^3 / 6`` multiply-adds.  Two ways
to get the rows ``R_psi(t, .) = E[J^t G(t, .)]`` of a whole solve, on the same inputs (the
``R_w`` and Jacobians of one solve, captured here):

* ``forward, stored``: (D2) as written, a row at a time forward in ``t``, every row of every
  draw kept (``N m^2 T^2 / 2`` doubles), in numpy.  This was ``rmt.dynamics.dmft`` until 2026-12-03.
* ``reverse``: ``lambda (I + K J) = e_t`` solved backwards for each row
  (``rmt.kernels.dispatch.response_kernel(m)``), ``O(m^2 T)`` numbers a draw.

Prints the time of each over the ``T`` rows (median of ``--repeats`` rounds, the two taking
turns), their ratio, the multiply-add rate against a DGEMM timed in the same run, the bytes
each keeps, the largest difference of the rows, and the time of a whole solve.

Run: ``python benchmarks/bench_dmft.py [--m 3] [--steps 150] [--draws 1500]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _util import GEMM_N, LoadMeter, cpu_info, set_threads

import rmt
import rmt.dynamics.dmft as dmft_module
from rmt.kernels.dispatch import response_kernel


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--draws", type=int, default=1500)
    p.add_argument("--delta", type=float, default=2.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    return p.parse_args(argv)


def capture_solve(m, steps, draws, delta):
    """One solve (phase retrieval, softplus/Huber, lr 0.5, init 0.01): its wall time and its
    final state (``KT``, ``J``, ``R_w``, ``R_psi``)."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(m, activation="softplus", loss="huber")
    rmt.dmft_gd(model, net, delta, 0.5, 3, 0.01, n_samples=draws, n_test=100)  # compile
    kept = {}
    original = dmft_module._result

    def keep(prob, d, st, ok, message):
        kept["st"] = st
        return original(prob, d, st, ok, message)

    dmft_module._result = keep
    try:
        t0 = time.perf_counter()
        res = rmt.dmft_gd(model, net, delta, 0.5, steps, 0.01, n_samples=draws, n_test=20_000)
        wall = time.perf_counter() - t0
    finally:
        dmft_module._result = original
    return wall, res, kept["st"]


def forward_rows(Rw4, J, N, lr_over_delta):
    """Every row of ``R_psi`` by (D2) forward, each draw's rows stored (the former solver)."""
    T, m = J.shape[0], J.shape[1]
    Jn = np.ascontiguousarray(np.transpose(J[..., :N], (3, 0, 1, 2)))  # (N, T, m, m)
    R = np.zeros((T, T, m, m))
    dpsi = []  # dpsi[t]: (m, t+1, N, m), d psi^t / d eta^s, row index first
    for t in range(T):
        dr = np.zeros((m, t + 1, N, m))
        dr[:, t] = np.eye(m)[:, None, :]
        for sp in range(t):
            block = dpsi[sp].reshape(m, -1)
            dr[:, : sp + 1] -= (lr_over_delta * Rw4[t, sp] @ block).reshape(dpsi[sp].shape)
        d = np.zeros_like(dr)
        for i in range(m):
            for j in range(m):
                d[i] += Jn[None, :, t, i, j, None] * dr[j]
        dpsi.append(d)
        R[t, : t + 1] = np.transpose(d.mean(axis=2), (1, 0, 2))
    return R


def reverse_rows(KT, J, N):
    T, m = J.shape[0], J.shape[1]
    kernel = response_kernel(m)
    R = np.zeros((T, T, m, m))
    row = np.empty((T, m, m))
    for t in range(T):
        kernel(KT, J, t, row[: t + 1])
        R[t, : t + 1] = row[: t + 1] / N
    return R


def main(argv=None):
    args = parse_args(argv)
    threads = set_threads(args.threads)
    cpu = cpu_info()
    m, T, N = args.m, args.steps, args.draws
    print(f"DMFT responses: m = {m}, {T} steps, {N} draws; CPU {cpu['model']}, {cpu['simd']}")
    print(f"threads: numba {threads['numba']}, BLAS {threads['blas']} (1 inside the timed rows)")
    meter = LoadMeter()
    with meter:
        wall, res, st = capture_solve(m, T, N, args.delta)
        KT = st.KT.reshape(-1, m, st.KT.shape[1])
        c = res.lr / res.delta
        from threadpoolctl import threadpool_limits

        a = np.random.default_rng(0).standard_normal((GEMM_N, GEMM_N))
        a @ a
        t0 = time.perf_counter()
        a @ a
        gemm_rate = 2 * GEMM_N**3 / (time.perf_counter() - t0)
        times = {"forward, stored": [], "reverse": []}
        out = {}
        reverse_rows(KT, st.J, N)  # warm
        with threadpool_limits(limits=1, user_api="blas"):
            for _ in range(args.repeats):
                for name, f in (
                    ("forward, stored", lambda: forward_rows(res.R_w, st.J, N, c)),
                    ("reverse", lambda: reverse_rows(KT, st.J, N)),
                ):
                    time.sleep(0.3)
                    t0 = time.perf_counter()
                    out[name] = f()
                    times[name].append(time.perf_counter() - t0)
    fma = N * m**3 * sum(t * (t + 1) / 2 for t in range(T))
    med = {k: statistics.median(v) for k, v in times.items()}
    npad = st.J.shape[3]
    kept = {"forward, stored": 8 * N * m * m * T * (T + 1) / 2, "reverse": 8 * T * m * m * npad}
    print(
        f"  DGEMM {GEMM_N}^3: {gemm_rate / 1e9:.0f} GFLOP/s; other processes {meter.other_load:.2f} cores"
    )
    print(
        f"  {'rows of one solve':<22} {'time':>9} {'GFLOP/s':>8} {'DGEMM share':>11} {'kept':>10}"
    )
    for name in times:
        rate = 2 * fma / med[name]
        print(
            f"  {name:<22} {med[name]:8.2f}s {rate / 1e9:8.2f} {rate / gemm_rate:10.0%} "
            f"{kept[name] / 2**20:8.0f} MiB"
        )
    diff = np.max(np.abs(out["reverse"] - out["forward, stored"])) / np.max(
        np.abs(out["forward, stored"])
    )
    print(
        f"  reverse / forward: {med['reverse'] / med['forward, stored']:.3f}; largest difference {diff:.1e} (relative)"
    )
    print(f"  a whole solve (reverse mode, {T} steps, test loss included): {wall:.2f} s")


if __name__ == "__main__":
    main()
