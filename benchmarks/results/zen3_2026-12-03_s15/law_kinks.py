import sys, time, numpy as np
sys.path.insert(0, "benchmarks")
import bench_freeprob as bf, rmt
from rmt.freeprob import law as lawmod
orig = lawmod._kink_positions
name, net, Q, delta = bf.sweep_configs()[0]
bf.sweep_law(net, Q)
for r in range(3):
    for closed in (False, True):
        lawmod._kink_positions = orig if closed else (lambda *a: None)
        ts = []
        for _ in range(5):
            t0 = time.perf_counter(); L = bf.sweep_law(net, Q); ts.append(time.perf_counter() - t0)
        print(f"round {r} {'closed form' if closed else 'grid search'}: law median {np.median(ts)*1e3:.1f} ms (min {min(ts)*1e3:.1f}), {L.D.shape[0]} nodes", flush=True)
