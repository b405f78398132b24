"""What Numba's OpenMP threads cost between kernels: sleeping at once against a short spin.

    python benchmarks/bench_wakeup.py [--spins 0 10000] [--size 8000] [--repeat 5]

``rmt.configure_threads()`` sets ``OMP_WAIT_POLICY=PASSIVE`` (spinning threads slowed
LAPACK/OpenBLAS 10-50x) and ``GOMP_SPINCOUNT=10000`` unless the user has set them.  libgomp
reads both when it loads (at Numba's first parallel kernel), so every setting runs in its own
child process, with the variables in its environment (they win over the defaults), which measures

* the start of a tiny parallel kernel 100 us after the previous one ended (an iterative solver
  starts a few parallel kernels per step, with that much Python between them);
* a 600 x 600 ``eigh`` with OpenBLAS on 2 threads right after a Numba kernel (a spinning Numba
  thread competes with BLAS for the second core);
* our block Lanczos, 5 smallest pairs to 1e-8, on the benchmark Hessian with ``m*d = size``.

Medians of ``--repeat`` runs; the last column is each setting's time over the first setting's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import rmt
settings = rmt.configure_threads()  # keeps the values of the environment below
assert not settings.applied and not settings.too_late, settings
from numba import njit, prange
from bench_eigensolvers import make_hessian

@njit(parallel=True)
def tiny(a):
    for i in prange(a.shape[0]):
        a[i] += 1.0

def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

a = np.zeros(8)
tiny(a)
wake = []
for _ in range(200):
    tiny(a)
    busy(100e-6)
    t0 = time.perf_counter()
    tiny(a)
    wake.append(time.perf_counter() - t0)
A = np.random.default_rng(0).standard_normal((600, 600))
A = A + A.T
np.linalg.eigh(A)
blas = []
for _ in range({repeat}):
    tiny(a)
    t0 = time.perf_counter()
    np.linalg.eigh(A)
    blas.append(time.perf_counter() - t0)
H = make_hessian({size})
rmt.extreme_eigs(H, k=5, method="block_lanczos", tol=1e-8, rng=0)
solve = []
for _ in range({repeat}):
    t0 = time.perf_counter()
    rmt.extreme_eigs(H, k=5, method="block_lanczos", tol=1e-8, rng=0)
    solve.append(time.perf_counter() - t0)
print(json.dumps({{"wake": statistics.median(wake), "blas": statistics.median(blas),
                  "solve": statistics.median(solve)}}))
"""


def run_child(spins: int, size: int, repeat: int) -> dict:
    env = dict(os.environ, GOMP_SPINCOUNT=str(spins), OMP_WAIT_POLICY="PASSIVE")
    bench = os.path.dirname(os.path.abspath(__file__))
    code = CHILD.format(bench=bench, size=size, repeat=repeat)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spins", type=int, nargs="+", default=[0, 10000])
    parser.add_argument("--size", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.size < 64 or args.size % 4 or args.repeat < 1 or any(s < 0 for s in args.spins):
        parser.error("--size must be a multiple of 4, >= 64; --repeat >= 1; --spins >= 0")
    rows = {s: run_child(s, args.size, args.repeat) for s in args.spins}
    base = rows[args.spins[0]]
    print(f"m*d = {args.size}, median of {args.repeat} (wake-up: of 200)")
    print(
        f"{'GOMP_SPINCOUNT':>15} {'wake-up us':>11} {'eigh ms':>8} {'block solve ms':>15}  ratios"
    )
    for s, r in rows.items():
        ratios = " / ".join(f"{r[k] / base[k]:.2f}" for k in ("wake", "blas", "solve"))
        print(
            f"{s:>15} {1e6 * r['wake']:>11.1f} {1e3 * r['blas']:>8.2f} "
            f"{1e3 * r['solve']:>15.1f}  {ratios}"
        )
    return rows


if __name__ == "__main__":
    main()
