"""``make demo``: a small end-to-end run that prints the bottom of a Hessian spectrum.

Grows into the real phase-transition demo as the experiment issue lands.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="results", help="folder for the figure")
    parser.add_argument("--d", type=int, default=400)
    parser.add_argument("--delta", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import rmt
    from scipy.linalg import eigh

    rng = np.random.default_rng(args.seed)
    model = rmt.MultiIndexModel("phase_retrieval")
    data = model.sample(int(args.delta * args.d), args.d, rng=rng)
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    W = 0.3 * rng.standard_normal((args.d, 2)) / np.sqrt(args.d)
    t0 = time.perf_counter()
    H = rmt.Hessian(net, data, W)
    evals, evecs = eigh(H.to_dense())
    print(f"Hessian m*d = {H.shape[0]} built and diagonalised in {time.perf_counter() - t0:.2f} s")
    print("bottom of the spectrum:", np.array2string(evals[:5], precision=5))
    V = evecs[:, :5].T.reshape(5, 2, args.d)
    ov = np.sum(np.einsum("cjd,dk->cjk", V, data.theta) ** 2, axis=(1, 2))
    print("squared overlaps with Theta*:", np.array2string(ov, precision=3))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(evals, bins=80, density=True, color="0.6")
    ax.set_xlabel("eigenvalue")
    ax.set_ylabel("density")
    ax.set_title(f"first-layer Hessian spectrum, delta = {args.delta:g}, d = {args.d}")
    fig.tight_layout()
    fig.savefig(out / "demo_spectrum.png", dpi=120)
    print(f"wrote {out / 'demo_spectrum.png'}")


if __name__ == "__main__":
    main()
