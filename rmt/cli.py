"""The ``rmt`` command: parse arguments, call the API, write JSON/CSV/PNG to ``--out``.

Commands: ``spectrum``, ``sweep``, ``threshold``, ``train``, ``bench``.  Bad options give a
one-line error and exit status 2, before anything is written.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

COMMANDS = ("spectrum", "sweep", "threshold", "train", "bench")


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"rmt: error: {message}\n")


def _common(p):
    g = p.add_argument_group("configuration")
    g.add_argument(
        "--target", default="phase_retrieval", help="registry target (default %(default)s)"
    )
    g.add_argument("--k", type=int, default=None, help="number of hidden directions")
    g.add_argument("--noise", type=float, default=0.0, help="label noise standard deviation")
    g.add_argument("--width", type=int, default=2, help="hidden width m (default %(default)s)")
    g.add_argument("--activation", default="softplus", help="(default %(default)s)")
    g.add_argument("--loss", default="huber", help="(default %(default)s)")
    g.add_argument("--huber-delta", type=float, default=1.0, help="huber threshold")
    g.add_argument("--point", default="population", help="population | trained | zero")
    g.add_argument("--d", type=int, default=1000, help="dimension (default %(default)s)")
    g.add_argument("--delta", default="2", help="n/d: a value, a list '1,2,4' or 'start:stop:num'")
    g.add_argument("--seeds", type=int, default=1, help="run seeds 0..N-1 (default 1)")
    g.add_argument("--out", default="results", help="output folder (default %(default)s)")
    g.add_argument("--json", action="store_true", help="print a machine-readable summary")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="rmt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    sp = sub.add_parser("spectrum", help="spectrum and theory for one configuration")
    _common(sp)
    sw = sub.add_parser("sweep", help="theory against simulation on a grid of delta")
    _common(sw)
    sw.add_argument("--scheduler", default=None, help="None (serial), 'local', or an address")
    th = sub.add_parser("threshold", help="delta_NN, delta_BBP and delta_alg")
    _common(th)
    th.add_argument("--max-delta", type=float, default=64.0, help="search up to this delta")
    th.add_argument(
        "--table",
        action="store_true",
        help="also tabulate delta_NN/delta_alg over activations, losses and widths",
    )
    tr = sub.add_parser("train", help="first phase of gradient descent and the escape")
    _common(tr)
    tr.add_argument("--steps", type=int, default=3000, help="maximum first-phase steps")
    tr.add_argument("--continue-steps", type=int, default=3000, help="steps after the plateau")
    tr.add_argument("--lr", type=float, default=0.5, help="learning rate")
    bn = sub.add_parser("bench", help="run the benchmark scripts")
    bn.add_argument("--which", default="hvp", help="hvp | eigensolvers | freeprob | peers | scale")
    bn.add_argument("--out", default="results", help="unused; kept for a uniform interface")
    bn.add_argument("--json", action="store_true", help="unused")
    return parser


def config_from_args(args):
    """A validated :class:`rmt.config.RunConfig` from parsed arguments (raises ValueError)."""
    from .config import RunConfig

    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1; got {args.seeds}")
    return RunConfig(
        target=args.target,
        k=args.k,
        noise=args.noise,
        width=args.width,
        activation=args.activation,
        loss=args.loss,
        huber_delta=args.huber_delta,
        point=args.point,
        d=args.d,
        deltas=args.delta,
        seeds=tuple(range(args.seeds)),
        train_steps=getattr(args, "steps", 2000),
        lr=getattr(args, "lr", 0.5),
    )


def _run_bench(args) -> dict:
    root = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
    script = root / f"bench_{args.which}.py"
    if not script.exists():
        raise ValueError(f"no benchmark {args.which!r}; expected {script}")
    code = subprocess.call([sys.executable, str(script)])
    return {"benchmark": str(script), "returncode": code}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "bench":
            summary = _run_bench(args)
        else:
            from . import commands

            config = config_from_args(args)
            runner = getattr(commands, f"cmd_{args.command}")
            summary = runner(config, pathlib.Path(args.out), args)
    except (ValueError, TypeError, ImportError, RuntimeError) as exc:
        print(f"rmt: error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
