import time, sys, os, numpy as np
from rmt.kernels import simd as base
import simdx
from rmt.kernels.hessian import default_chunks
sys.path.insert(0, "benchmarks")
from _kernels import stream_pass
name = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
n, d, m = 16000, 4000, 4
cols = int(os.environ.get("COLS", "4"))
rng = np.random.default_rng(0)
X = rng.standard_normal((n, d))
D = rng.standard_normal((n, m, m)); D = D + D.transpose(0, 2, 1)
Vt = rng.standard_normal((cols, d))
if cols > m:
    D = np.ascontiguousarray(D)  # block: D same for each vector (kernel contracts per m)
nc = default_chunks()
from numpy.lib.stride_tricks import as_strided
if os.environ.get('SAMEROW'):
    row = X[:1].copy(); X = as_strided(row, shape=(n, d), strides=(0, 8)); X.flags.writeable = False
kb = getattr(base, os.environ.get("BASE", name)); kv = getattr(simdx, name)
def steal():
    return int(open('/proc/stat').readline().split()[8])
def t(f, reps=7):
    f(); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return np.median(ts) * 1e3
rat = []
for r in range(rounds):
    s0 = steal()
    p = t(lambda: stream_pass(X))
    a = t(lambda: kb(X, D, Vt, nc)); b = t(lambda: kv(X, D, Vt, nc))
    a2 = t(lambda: kb(X, D, Vt, nc))
    rat.append(b / (0.5 * (a + a2)))
    print(f"round {r}: pass {p:.1f}  base {a:.1f}/{a2:.1f} ({a/p:.2f})  variant {b:.1f} ({b/p:.2f})  ratio {rat[-1]:.3f}  steal {steal()-s0} ticks", flush=True)
print("median ratio", np.median(rat))
