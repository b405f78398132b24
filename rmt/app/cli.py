"""rmt: when does a two-layer network learn a hidden feature? Hessian spectra, BBP thresholds and delta_NN.

The ``rmt`` command line: each command calls the API and writes JSON/CSV/PNG to ``--out``.

Commands: ``spectrum``, ``sweep``, ``threshold``, ``train``, ``learn``, ``phase-diagram``,
``grokking``, ``bench``.  The options of all but ``bench``, and their defaults, are the fields of
:class:`rmt.RunConfig` that name the command in their metadata.  Bad options give a one-line error and exit status 2, before anything
is written.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from dataclasses import fields

from rmt.experiments.config import RUN_COMMANDS, RunConfig
from rmt.experiments.store import finite_or_none
from rmt.kernels.threads import configure_threads
from rmt.problem.models import TARGETS
from rmt.problem.network import ACTIVATIONS, LOSSES
from rmt.thresholds.points import config_point_kinds

COMMANDS = (*RUN_COMMANDS, "bench")
#: what ``rmt --help`` opens with: the question the toolkit answers
DESCRIPTION = (
    "rmt answers when a two-layer network trained by gradient descent on n = delta*d Gaussian "
    "samples learns a hidden low-dimensional feature: from the threshold delta_NN on, the Hessian "
    "at the plateau of gradient descent has a negative outlier eigenvector carrying the feature. "
    "It computes delta_NN, and the threshold delta_alg of spectral methods, by random-matrix "
    "theory, by the dynamical mean-field theory of gradient descent and by simulation."
)
HELP = {
    "spectrum": "spectrum and theory for one configuration",
    "sweep": "theory against simulation on a grid of delta",
    "threshold": "thresholds: the asymptotic delta_NN (DMFT) with its error, delta_alg and delta_pop; "
    "with --point trained also delta_NN and delta_GD by simulation",
    "train": "one gradient-descent run: its two phases, the Hessian at the plateau, the escape",
    "learn": "what gradient descent learns across delta: the learning transition next to the Hessian one",
    "phase-diagram": "the asymptotic delta_NN (DMFT) with its error over a grid of width, "
    "activation, loss, initialisation, step size, weight decay or target",
    "grokking": "the grokking-like delay: the plateau length of gradient descent over d, delta "
    "and seeds against the plateau-length law of the DMFT",
    "bench": "run the benchmark scripts of a source checkout",
}
BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"rmt: error: {message}\n")


def flag_of(f) -> str:
    """The command-line flag of a RunConfig field."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def registry_choices(name: str):
    """The registered names of the field ``name`` (targets, activations, losses), else None."""
    known = {"target": TARGETS, "activation": ACTIVATIONS, "loss": LOSSES}.get(name)
    return None if known is None else list(known)


def _help(f) -> str:
    meta = f.metadata
    choices = registry_choices(f.name)
    if choices is not None:
        return f"{meta['help']}: {' | '.join(choices)} (default {f.default})"
    if f.name == "point":
        return f"{meta['help']}: {' | '.join(config_point_kinds())} (default {f.default})"
    if isinstance(f.default, bool):
        return meta["help"]
    return f"{meta['help']} (default {meta.get('shown', f.default)})"


def add_config_options(parser, command) -> None:
    """One flag per RunConfig field that ``command`` uses, in the field's group.

    Defaults stay with the dataclass: a flag that is not given is not passed on.
    """
    groups = {}
    for f in fields(RunConfig):
        meta = f.metadata
        if command not in meta["commands"]:
            continue
        if meta["group"] not in groups:
            groups[meta["group"]] = parser.add_argument_group(meta["group"])
        kwargs = {"dest": f.name, "default": argparse.SUPPRESS, "help": _help(f)}
        if isinstance(f.default, bool):
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = meta.get("cli_type") or type(f.default)
        groups[meta["group"]].add_argument(flag_of(f), **kwargs)
    out = parser.add_argument_group("output")
    out.add_argument("--out", default="results", help="output folder (default %(default)s)")
    out.add_argument(
        "--json",
        action="store_true",
        help="print only a JSON summary on stdout (human-readable text goes to stderr)",
    )
    out.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bars or stage lines (bars show only when stderr is a terminal)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="rmt", description=DESCRIPTION)
    parser.add_argument(
        "--version", action="version", version=f"rmt {importlib.metadata.version('rmt')}"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for command in RUN_COMMANDS:
        add_config_options(sub.add_parser(command, help=HELP[command]), command)
    bench = sub.add_parser("bench", help=HELP["bench"])
    bench.add_argument(
        "--which", default="hvp", help="hvp | eigensolvers | freeprob | peers | scale"
    )
    return parser


def config_from_args(args) -> RunConfig:
    """A validated :class:`rmt.RunConfig` from parsed arguments (raises ValueError)."""
    values = {}
    for f in fields(RunConfig):
        if hasattr(args, f.name):
            convert = f.metadata.get("to_field")
            value = getattr(args, f.name)
            values[f.name] = convert(value) if convert else value
    return RunConfig(**values)


def flag_message(message: str) -> str:
    """``message`` with a leading RunConfig field name replaced by its flag."""
    for f in fields(RunConfig):
        if message.startswith(f.name + " "):
            return flag_of(f) + message[len(f.name) :]
    return message


def check_out(out) -> pathlib.Path:
    """``out`` as a folder that can be written, checked before any work (raises ValueError).

    It may not exist yet; then its nearest existing parent must be a writable folder.
    """
    path = pathlib.Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out {out} is an existing file, not a folder; give a folder")
    parent = path
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--out {out}: {parent} is a file, so the folder cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: the folder {parent} is not writable")
    try:  # the permission bits do not tell everything (/proc, read-only mounts): try it
        probe = tempfile.mkdtemp(prefix=".rmt-probe-", dir=parent)
        os.rmdir(probe)
    except OSError as err:
        raise ValueError(f"--out {out}: cannot create a folder in {parent} ({err.strerror})")
    return path


#: what a resumable command says when it is interrupted
RESUMABLE = {
    "sweep": "sweep.csv",
    "learn": "learn.csv",
    "phase-diagram": "phase_diagram.csv",
    "grokking": "grokking_runs.csv",
}


def interrupted_message(command: str, out) -> str:
    """The one line printed after Ctrl-C: what was kept and how to resume."""
    if command in RESUMABLE:
        return (
            f"rmt: interrupted; the finished points are kept in {out} ({RESUMABLE[command]}): "
            "rerun the same command to resume"
        )
    return "rmt: interrupted; no result files were written"


def run_bench(which: str) -> dict:
    """Run ``benchmarks/bench_<which>.py`` of the source checkout next to the package."""
    if not BENCHMARKS.is_dir():
        raise ValueError(f"rmt bench needs a source checkout: no benchmarks/ at {BENCHMARKS}")
    script = BENCHMARKS / f"bench_{which}.py"
    if not script.exists():
        known = ", ".join(sorted(p.stem[6:] for p in BENCHMARKS.glob("bench_*.py")))
        raise ValueError(f"no benchmark {which!r}; known: {known}")
    code = subprocess.call([sys.executable, str(script)])
    return {"benchmark": str(script), "returncode": code}


def main(argv=None) -> int:
    """Run one command; 0 on success, 2 on an error (one line on stderr), 130 on Ctrl-C.

    Progress bars show only when stderr is a terminal and ``--quiet`` is not given; stage
    lines and the closing summary go to stderr, so that ``--json`` leaves stdout to the JSON.
    """
    configure_threads()
    args = build_parser().parse_args(argv)
    quiet = getattr(args, "quiet", False)
    try:
        if args.command == "bench":
            summary = run_bench(args.which)
        else:
            from rmt.app import commands  # lazy: keeps `rmt --help` quick

            config = config_from_args(args)
            out = check_out(args.out)
            runner = getattr(commands, "cmd_" + args.command.replace("-", "_"))
            progress = False if quiet else None  # None: bars when stderr is a terminal
            summary = runner(config, out, progress=progress, quiet=quiet)
    except KeyboardInterrupt:
        print(interrupted_message(args.command, getattr(args, "out", None)), file=sys.stderr)
        return 130
    except (ValueError, TypeError, ImportError, RuntimeError, OSError) as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"rmt: error: {flag_message(message)}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(finite_or_none(summary), default=str, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
