"""``delta_NN`` of the DMFT at finite input dimensions: ``rmt.dmft_delta_nn(model, net, d=d)``.

At each ``delta`` every replica's Hessian law comes from the ``n = ceil(delta d)`` samples of a
network of input dimension ``d`` (docs/theory.md 8.10, "A finite size").  Where rare draws set
the left edge of the law (the square loss with phase retrieval's heavy-tailed labels) the
threshold moves with ``d``; where the edge has converged (the Huber loss) it does not.  One
call per loss and ``d`` with the defaults otherwise (phase retrieval, softplus, m = 2, lr 0.5,
init 0.01); prints each value with its standard error and wall time, ``--json`` writes the
rows.  The simulated order parameter at the same sizes is
``benchmarks/validate_simulated_delta_nn.py --loss square --d D``.

Run: ``python benchmarks/dmft_finite_size.py [--losses square huber] [--sizes 1000 4000]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import time

from _util import cpu_info

import rmt


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--losses", nargs="+", default=["square", "huber"])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 16000])
    p.add_argument("--activation", default="softplus")
    p.add_argument("--width", type=int, default=2)
    p.add_argument("--target", default="phase_retrieval")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}")
    model = rmt.MultiIndexModel(args.target)
    rows = []
    for loss in args.losses:
        net = rmt.TwoLayerNet(args.width, activation=args.activation, loss=loss)
        for d in args.sizes:
            t0 = time.perf_counter()
            res = rmt.dmft_delta_nn(model, net, d=d)
            row = {
                "loss": loss,
                "d": d,
                "delta_nn": res.value if res.converged else None,
                "stderr": res.stderr if res.converged else None,
                "replicas": res.replicas,
                "message": res.message,
                "seconds": round(time.perf_counter() - t0, 1),
            }
            rows.append(row)
            value = f"{res.value:.3f} ± {res.stderr:.3f}" if res.converged else "not determined"
            print(f"{loss:7s} d = {d:6d}: {value} ({res.replicas} replicas, "
                  f"{row['seconds']} s) {res.message}", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cpu": info, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
