import time, sys, numpy as np
from numpy.lib.stride_tricks import as_strided
import os; import importlib; simd = importlib.import_module(os.environ.get("SIMDMOD","rmt.kernels.simd"))
from rmt.kernels.hessian import default_chunks
sys.path.insert(0, "benchmarks")
from _kernels import stream_pass
n, d, m = 16000, 4000, 4
rng = np.random.default_rng(0)
X = rng.standard_normal((n, d))
D = rng.standard_normal((n, m, m)); D = D + D.transpose(0, 2, 1)
Vt = rng.standard_normal((m, d))
nc = default_chunks()
row = X[:1].copy()
Xs = as_strided(row, shape=(n, d), strides=(0, 8))
Xs.flags.writeable = False
X512 = X[:512].copy(); D512 = D[:512].copy()
kern = {name: getattr(simd, name) for name in sys.argv[1:]} or {"simd4_c4": simd.simd4_c4}
def t(f, reps=7):
    f(); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return np.median(ts) * 1e3
for rnd in range(2):
    p = t(lambda: stream_pass(X))
    print(f"pass {p:.1f} ms")
    for name, k in kern.items():
        a = t(lambda: k(X, D, Vt, nc))
        b = t(lambda: k(Xs, D, Vt, nc))
        c = t(lambda: [k(X512, D512, Vt, nc) for _ in range(31)], reps=3)
        gf = 4 * n * d * m / 1e9
        print(f"{name}: DRAM {a:.1f} ms ({a/p:.2f} pass, {gf/a*1e3:.0f} GF/s)  same-row {b:.1f} ms ({gf/b*1e3:.0f} GF/s)  L3 31x512 {c:.1f} ms ({gf/c*1e3:.0f} GF/s)")
