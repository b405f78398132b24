"""Is the jackknife error of the DMFT learning margin honest? Independent seeds at one delta.

``rmt.dmft_margin`` at one ``delta`` (phase retrieval, softplus/Huber, m = 2; 16 replicas of
1250 draws and the default laws, as in ``rmt.dmft_delta_nn``) for several seeds of the
draws: the spread (sd) of the margins over the seeds against the mean reported jackknife
error and the plain ``sd / sqrt(R)`` of the replicas at the vertex.  An honest error bar
matches the spread.

Run: ``python benchmarks/dmft_margin_spread.py [--delta 2.63] [--seeds 8] [--first 100]
[--replicas 16] [--draws 1250]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from _util import cpu_info

import rmt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--delta", type=float, default=2.63)
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--first", type=int, default=100, help="the first seed")
    p.add_argument("--replicas", type=int, default=16)
    p.add_argument("--draws", type=int, default=1250)
    args = p.parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}")
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    ms, jk, plain = [], [], []
    for seed in range(args.first, args.first + args.seeds):
        ev = rmt.dmft_margin(
            model, net, args.delta, replicas=args.replicas, n_samples=args.draws, rng=seed
        )
        R = ev.margins.size
        ms.append(ev.margin)
        jk.append(ev.margin_se)
        plain.append(ev.margins.std(ddof=1) / np.sqrt(R))
        print(f"seed {seed}: t1 {ev.t1}, vertex {ev.vertex:.1f}, margin {ev.margin:+.5f}, "
              f"jackknife {ev.margin_se:.5f}, plain {plain[-1]:.5f}", flush=True)  # fmt: skip
    print(f"over {len(ms)} seeds: spread (sd) {np.std(ms, ddof=1):.5f}, mean jackknife error "
          f"{np.mean(jk):.5f}, mean plain error {np.mean(plain):.5f}")  # fmt: skip


if __name__ == "__main__":
    main()
