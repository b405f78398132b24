"""The plateau of gradient descent before it learns ``Theta*`` (the "grokking-like" delay).

A two-layer network trained by full-batch gradient descent on phase retrieval (the
``rmt.RunConfig`` defaults: softplus, Huber loss, width m = 2, lr 0.5, init_scale 0.01) first fits
what the large gradients span and stops on a plateau ``W1`` (``GDRun.plateau_step``, the
project's default plateau rule), then leaves it along a negative Hessian direction that carries
``Theta*``: ``GDRun.escape_step`` is the first step after the plateau where the ``Theta*``
overlap reaches 1/2.  This script measures the plateau length ``escape_step - plateau_step`` in
steps (times ``lr``: ``GDRun.escape_time``, in gradient-flow time) over sizes ``d``, sample
ratios ``delta = n/d`` and seeds.  Each ``(d, delta, seed)`` is one run of
``rmt.experiments.learning.run_descent`` (the project's training set and start for that
``(delta, seed)``, no test-set pass) through ``rmt.experiments.grokking.plateau_run``, and
the summary is ``rmt.experiments.grokking.plateau_summary``; the prediction it is compared with
is ``rmt.dynamics.escape`` (not called here; ``rmt grokking`` does both in one command).

A run that has not escaped within ``--steps`` updates is *censored*: it is kept, with its
plateau step and no length.  The per-``(d, delta)`` summary counts censored runs as +infinity:
median and quartiles of the plateau length (a quartile that falls on a censored run prints as
"> budget"), and the number of censored runs.  A run whose overlap already reaches 1/2 at the
plateau (learned in the first phase) has length 0; one without a detected plateau is censored.

Runs go from the smallest ``d`` up; one line per run is printed as it ends, and the JSON
(command, date, CPU, settings, every run, the summary) is rewritten atomically after every run,
so an interrupted sweep keeps what it has and ``--resume`` skips the runs already in the file.
Single-threaded by default (``--threads`` sets ``RMT_NUM_THREADS``, ``NUMBA_NUM_THREADS``,
``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` before numpy and rmt are imported).

    python benchmarks/grokking_plateau.py --d 500 2000 --deltas 2.8 3.2 3.8 4.6 5.6 7.0 \
        --seeds 6 --steps 20000 --json benchmarks/results/grokking/plateau.json

``--stop-after-escape K`` ends each run ``K`` steps after its escape (same data, start and
steps, so the same plateau and escape; "learned" is then read ``K`` steps after the escape
instead of at the end of the budget): much cheaper where most runs escape early.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import shlex
import sys
import time

THREAD_VARS = ("RMT_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: settings that must agree between a JSON file and a --resume of it
SAME_ON_RESUME = (
    "target",
    "activation",
    "loss",
    "width",
    "lr",
    "init_scale",
    "weight_decay",
    "steps",
    "stop_after_escape",
)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[500, 2000], help="dimensions")
    ap.add_argument(
        "--deltas",
        type=float,
        nargs="+",
        default=[2.8, 3.2, 3.8, 4.6, 5.6, 7.0],
        help="sample ratios n/d",
    )
    ap.add_argument("--seeds", type=int, default=6, help="seeds 0..N-1")
    ap.add_argument("--steps", type=int, default=20000, help="step budget of each run")
    ap.add_argument("--activation", default=None, help="default: RunConfig's")
    ap.add_argument("--loss", default=None, help="default: RunConfig's")
    ap.add_argument("--width", type=int, default=None, help="default: RunConfig's")
    ap.add_argument("--lr", type=float, default=None, help="default: RunConfig's")
    ap.add_argument("--init-scale", type=float, default=None, help="default: RunConfig's")
    ap.add_argument(
        "--stop-after-escape",
        type=int,
        default=None,
        metavar="K",
        help="end a run K steps after its escape (default: run the whole budget)",
    )
    ap.add_argument("--json", default=None, help="output file (rewritten after every run)")
    ap.add_argument("--resume", action="store_true", help="skip the runs already in --json")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.resume and not args.json:
        ap.error("--resume needs --json")
    if args.threads < 1 or args.seeds < 1 or args.steps < 1:
        ap.error("--threads, --seeds and --steps must be >= 1")
    return args


def set_thread_env(n: int) -> None:
    """The thread counts of rmt, Numba, OpenMP and OpenBLAS (before they are imported)."""
    for name in THREAD_VARS:
        os.environ[name] = str(n)


def cpu_model() -> str:
    """The "model name" of /proc/cpuinfo ("unknown" where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def make_config(args, d):
    """``rmt.RunConfig`` at ``d`` with the options given (the defaults otherwise)."""
    from dataclasses import replace

    import rmt

    given = {
        "activation": args.activation,
        "loss": args.loss,
        "width": args.width,
        "lr": args.lr,
        "init_scale": args.init_scale,
    }
    changes = {k: v for k, v in given.items() if v is not None}
    return replace(rmt.RunConfig(), d=d, train_steps=args.steps, **changes)


def settings_of(config, args) -> dict:
    from rmt.experiments.grokking import ESCAPE_OVERLAP

    return {
        "target": config.target,
        "activation": config.activation,
        "loss": config.loss,
        "huber_delta": config.huber_delta,
        "width": config.width,
        "lr": config.lr,
        "init_scale": config.init_scale,
        "weight_decay": config.weight_decay,
        "noise": config.noise,
        "steps": args.steps,
        "stop_after_escape": args.stop_after_escape,
        "learned_overlap": ESCAPE_OVERLAP,
        "escape_overlap": ESCAPE_OVERLAP,
        "d": list(args.d),
        "deltas": list(args.deltas),
        "seeds": list(range(args.seeds)),
        "threads": args.threads,
    }


def one_run(config, delta, seed, stop_after_escape) -> dict:
    """One run's record (``rmt.experiments.grokking.plateau_run``), BLAS on the threads given."""
    from threadpoolctl import threadpool_limits

    from rmt.experiments.grokking import plateau_run

    with threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas"):
        return plateau_run(config, delta, seed, stop_after_escape)


def summarize(runs) -> list[dict]:
    """Per ``(d, delta)``: median and quartiles of the plateau length (censored = +inf)."""
    from rmt.experiments.grokking import plateau_summary

    return plateau_summary(runs)


def fmt_length(value, censored) -> str:
    return "> budget" if censored else f"{value:.0f}"


def summary_line(s) -> str:
    parts = [fmt_length(s[k], s[k + "_censored"]) for k in ("q25", "median", "q75")]
    return (
        f"  d = {s['d']} delta = {s['delta']:g}: plateau length median {parts[1]} "
        f"[q25 {parts[0]}, q75 {parts[2]}] steps; censored {s['censored']}/{s['runs']}, "
        f"learned {s['learned']}/{s['runs']}, plateau rule before_escape "
        f"{s['before_escape_rule']}/{s['runs']}"
    )


def run_line(r) -> str:
    length = "censored" if r["censored"] else f"{r['plateau_length']}"
    return (
        f"d = {r['d']} delta = {r['delta']:g} seed = {r['seed']}: plateau {r['plateau_step']} "
        f"({r['plateau_rule']}) "
        f"escape {r['escape_step']} length {length} final overlap {r['final_overlap']:.3f} "
        f"({r['steps_made']} steps, {r['seconds']:.1f} s, {r['ms_per_step']:.2f} ms/step)"
    )


def load_previous(path, settings) -> tuple[list, list]:
    """Runs and commands of an existing JSON file; its settings must agree with these."""
    import json

    old = json.loads(pathlib.Path(path).read_text())
    for key in SAME_ON_RESUME:
        if old["settings"].get(key) != settings[key]:
            raise SystemExit(
                f"--resume: {path} has {key} = {old['settings'].get(key)!r}, "
                f"this command {settings[key]!r}"
            )
    return old["runs"], old.get("commands", [old.get("command")])


def main(argv=None):
    args = parse_args(argv)
    set_thread_env(args.threads)

    import rmt
    from rmt.experiments.store import write_json

    rmt.configure_threads()
    rmt.set_num_threads(args.threads)
    sizes = sorted(set(args.d))
    configs = {d: make_config(args, d) for d in sizes}
    settings = settings_of(configs[sizes[0]], args)
    command = shlex.join([sys.executable, *sys.argv])
    runs, commands = [], []
    if args.resume and pathlib.Path(args.json).exists():
        runs, commands = load_previous(args.json, settings)
        print(f"resuming {args.json}: {len(runs)} runs kept", flush=True)
    commands = [*commands, command]
    done = {(r["d"], r["delta"], r["seed"]) for r in runs}
    cpu = cpu_model()
    print(f"{command}\nCPU: {cpu}; threads {args.threads}; settings {settings}", flush=True)

    def save():
        if args.json:
            payload = {
                "what": "plateau length of gradient descent, escape_step - plateau_step",
                "command": command,
                "commands": commands,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "cpu": cpu,
                "rmt_version": getattr(rmt, "__version__", None),
                "settings": settings,
                "runs": sorted(runs, key=lambda r: (r["d"], r["delta"], r["seed"])),
                "summary": summarize(runs),
            }
            pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            write_json(args.json, payload)

    t0 = time.perf_counter()
    for d in sizes:
        for delta in sorted(args.deltas):
            new = False
            for seed in range(args.seeds):
                if (d, float(delta), seed) in done:
                    continue
                r = one_run(configs[d], delta, seed, args.stop_after_escape)
                runs.append(r)
                new = True
                print(run_line(r), flush=True)
                save()
            group = [s for s in summarize(runs) if (s["d"], s["delta"]) == (d, float(delta))]
            if group and new:
                print(summary_line(group[0]), flush=True)
    save()
    print(f"\nsummary ({time.perf_counter() - t0:.0f} s this command):", flush=True)
    for s in summarize(runs):
        print(summary_line(s), flush=True)


if __name__ == "__main__":
    main()
