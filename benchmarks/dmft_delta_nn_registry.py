"""The default ``rmt.dmft_delta_nn(model, net)`` over the registry: a number or a reason.

For every activation of the registry and the square and Huber losses (phase retrieval, m = 2,
the defaults of ``rmt.RunConfig``: lr 0.5, init_scale 0.01), one call with the default
settings.  Prints, per configuration, ``delta_NN`` with its standard error, or the one-line
reason it was not determined, and the wall time; ``--json`` writes the rows.

``--sizes D ...``: one call per input dimension ``D`` instead, ``rmt.dmft_delta_nn(model, net,
d=D)``: each Hessian law from the ``ceil(delta D)`` samples of a network of that size
(docs/theory.md 8.10, "A finite size").  Where rare draws set the left edge of the law (the
square loss with phase retrieval's heavy-tailed labels) the threshold moves with ``D``; where
the edge has converged (the Huber loss) it does not.  The simulated order parameter at the
same sizes is ``benchmarks/validate_simulated_delta_nn.py --loss square --d D``.

Run: ``python benchmarks/dmft_delta_nn_registry.py [--activations tanh relu] [--sizes 1000 4000]
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
    p.add_argument("--activations", nargs="+", default=list(rmt.ACTIVATIONS))
    p.add_argument("--losses", nargs="+", default=["square", "huber"])
    p.add_argument("--sizes", type=int, nargs="+", default=[None], help="default: the limit")
    p.add_argument("--target", default="phase_retrieval")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    info = cpu_info()
    print(f"CPU: {info['model']}, {info['simd']}")
    model = rmt.MultiIndexModel(args.target)
    rows = []
    for act in args.activations:
        for loss in args.losses:
            net = rmt.TwoLayerNet(2, activation=act, loss=loss)
            for d in args.sizes:
                t0 = time.perf_counter()
                res = rmt.dmft_delta_nn(model, net, d=d)
                wall = time.perf_counter() - t0
                row = {
                    "target": args.target,
                    "activation": act,
                    "loss": loss,
                    "d": d,
                    "converged": res.converged,
                    "delta_nn": res.value if res.converged else None,
                    "stderr": res.stderr if res.converged else None,
                    "replicas": res.replicas,
                    "message": res.message,
                    "wall_s": wall,
                }
                rows.append(row)
                text = (
                    f"{res.value:.3f} ± {res.stderr:.3f}"
                    if res.converged
                    else f"not determined: {res.message}"
                )
                size = "" if d is None else f", d = {d}"
                print(
                    f"{args.target}, {act}/{loss}, m = 2{size}: delta_NN = {text} ({wall:.0f} s)",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
