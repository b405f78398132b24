"""The DMFT curves (``rmt.dmft_replicas``) against gradient descent at finite ``d``.

For every registry activation (``relu`` included), the square and Huber losses and
``init_scale`` 1 and 0.01: phase retrieval (``y = z^2``), width ``m = 2``, ``delta = 4``,
``T = 60`` steps.  Gradient descent (``rmt.gradient_descent``) at ``d = 2000`` with 3 seeds
(data seed ``1000 + s``, a test set of 20 000 samples with seed ``2000 + s``, initial weights
seed ``3000 + s``); the DMFT from 4 replicas of 10 000 draws (``rng = 0``).  Both index the
same iterates ``W^0 .. W^{T-1}``; they are compared at ``t = T/4, T/2, T-1`` on

* the train loss, the test loss and the gradient norm (Frobenius);
* ``|M|_F^2 = |W^{tT} Theta*|_F^2`` and ``tr Q = |W^t|_F^2`` (the simulation is run in
  segments that stop at those steps, each continuing from the last iterate of the one before:
  the same trajectory, bit for bit, as one run).

Tolerance: ``|DMFT - GD mean| <= 4 sqrt(se_gd^2 + se_dmft^2) + allowance``.  ``se_gd`` is the
standard deviation over the seeds over ``sqrt(seeds)``, ``se_dmft`` that over the replicas
over ``sqrt(replicas)``.  The allowance is ``0.01 |GD mean|`` for the losses, the gradient
norm and ``tr Q`` (the ``O(1/d)`` bias and, for ReLU, the bias of the smoothed kink).  For
``|M|_F^2`` it is ``3 / d``: for an even target ``M`` stays 0 in the ``d -> inf`` limit, while
at finite ``d`` it starts at ``|M|_F^2 ~ m init^2 / d`` and grows along the unstable
direction, an ``O(1/d)`` quantity that the limit does not contain.

Step sizes (``LR``), from 60-step runs at ``d = 1000`` (``lr_probe.log`` in the results):
0.5 where gradient descent is stable (tanh, softplus, erf, relu); 0.1 for the quadratic
activation (at 0.5 the square loss diverges and Huber oscillates, at 0.2 the square loss
oscillates); cubic at ``init 0.01``: 0.1 (0.2 diverges with the square loss; at 0.1 the curves
stay on the saddle at ``W = 0`` for the 60 steps); cubic at ``init 1``: 0.01 with the square
loss (0.03 diverges in 4 steps from a gradient norm of 25) and 0.05 with Huber (at 0.1 the
loss goes up and down).  A case whose simulation diverges, whose DMFT solve reports
``converged = False`` or whose comparison fails stays in the table with the reason.

For ``relu`` the DMFT smooths the kink with width ``h sd(u)``: each ReLU case is solved at the
default ``h = rmt.dynamics.dmft.RELU_SMOOTHING`` and again at ``h / 3`` (a row of its own), against the
same simulations; the note gives the largest ``|DMFT(h) - DMFT(h/3)|`` in units of its
standard error.  A note flags the points whose tolerance exceeds a quarter of the GD value
(the DMFT replicas spread widely there, so that a pass says little).

Run: ``python benchmarks/validate_dmft_curves.py`` (the grid, a few minutes on 2 cores), or
``--quick`` (two cases); ``--out DIR`` writes ``table.md``, ``table_by_step.md``,
``comparisons.csv`` and ``MANIFEST.md`` there.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import subprocess
import sys
import time

import numpy as np
from _util import LoadMeter

import rmt
from rmt.dynamics.dmft import RELU_SMOOTHING

ACTIVATIONS = ("tanh", "quadratic", "cubic", "softplus", "erf", "relu")
LOSSES = ("square", "huber")
INITS = (1.0, 0.01)
QUANTITIES = ("train", "test", "grad", "M2", "trQ")
LABELS = {
    "train": "train loss",
    "test": "test loss",
    "grad": "grad norm",
    "M2": "‖M‖_F^2",
    "trQ": "tr Q",
}
#: the relative allowance (``O(1/d)`` and smoothing bias) of every quantity but ``|M|_F^2``
REL_ALLOWANCE = 0.01
#: ``|M|_F^2`` is allowed ``M2_ALLOWANCE / d``
M2_ALLOWANCE = 3.0

#: the step size of each (activation, loss, init_scale); see the module docstring
LR = {
    ("quadratic", "square", 1.0): 0.1,
    ("quadratic", "square", 0.01): 0.1,
    ("quadratic", "huber", 1.0): 0.1,
    ("quadratic", "huber", 0.01): 0.1,
    ("cubic", "square", 1.0): 0.01,
    ("cubic", "square", 0.01): 0.1,
    ("cubic", "huber", 1.0): 0.05,
    ("cubic", "huber", 0.01): 0.1,
}
DEFAULT_LR = 0.5


def step_size(activation, loss, init):
    return LR.get((activation, loss, float(init)), DEFAULT_LR)


def checkpoints(steps):
    return (steps // 4, steps // 2, steps - 1)


#: the data sets of each (n, d, n_test, seed), shared by the cases
_DATA = {}


def datasets(model, n, d, n_test, s):
    """The training set (seed ``1000 + s``) and the test set (``2000 + s``, same ``Theta*``)."""
    key = (model.name, n, d, n_test, s)
    if key not in _DATA:
        data = model.sample(n, d, rng=1000 + s)
        _DATA[key] = data, model.sample(n_test, d, rng=2000 + s, theta=data.theta)
    return _DATA[key]


def simulate(model, net, delta, lr, steps, init, d, seeds, n_test, points, starts=None):
    """Gradient descent for each seed; every quantity at ``points`` (``seeds x points``, NaN
    after a divergence), the number of diverged seeds and the wall time.  A list ``starts``
    receives each seed's starting point ``W0``."""
    out = {q: np.full((len(seeds), len(points)), np.nan) for q in QUANTITIES}
    diverged = 0
    t0 = time.perf_counter()
    for i, s in enumerate(seeds):
        data, test = datasets(model, int(round(delta * d)), d, n_test, s)
        W, start = None, 0
        for j, t in enumerate(points):
            kw = {"rng": 3000 + s, "init_scale": init} if W is None else {"W0": W}
            with np.errstate(all="ignore"):
                run = rmt.gradient_descent(
                    net, data, test=test, lr=lr, steps=t - start, progress=False, **kw
                )
            if starts is not None and W is None:
                starts.append(run.W0)
            if run.diverged:
                diverged += 1
                break
            W, start = run.W_final, t
            out["train"][i, j] = run.loss[-1]
            out["test"][i, j] = run.test_loss[-1]
            out["grad"][i, j] = run.grad_norm[-1]
            out["M2"][i, j] = np.sum((W.T @ data.theta) ** 2)
            out["trQ"][i, j] = np.sum(W**2)
    return out, diverged, time.perf_counter() - t0


def solve(model, net, delta, lr, steps, init, replicas, draws, rng, h, points, d=None):
    """The DMFT replicas; every quantity at ``points`` (``replicas x points``), whether all
    converged, the message and the wall time.

    With ``d`` and an even target with ``k = 1`` the solve carries the ``Theta*`` row
    (docs/theory.md 7.8), and ``|M|^2`` is its finite-``d`` mean ``tr S / d``: the ``Theta*``
    component that a run at that ``d`` has and the limit does not.  ``tr Q`` stays the
    limit's: the row adds ``tr S / d`` to it only while that is small, and past that the run
    trades the rest of ``W`` for it (non-linear)."""
    row = d is not None and model.even and model.k == 1
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        rep = rmt.dmft_replicas(
            model,
            net,
            delta,
            lr,
            steps,
            init,
            replicas=replicas,
            n_samples=draws,
            rng=rng,
            relu_smoothing=h,
            theta_row=row,
        )
    idx = list(points)
    out = {
        "train": np.array([r.train_loss[idx] for r in rep.results]),
        "test": np.array([r.test_loss[idx] for r in rep.results]),
        "grad": np.array([r.grad_norm[idx] for r in rep.results]),
        "M2": np.array([np.sum(r.M[idx] ** 2, axis=(1, 2)) for r in rep.results]),
        "trQ": np.array([np.trace(r.Q[idx], axis1=1, axis2=2) for r in rep.results]),
    }
    if row:
        extra = np.array([np.trace(r.seed_cov[idx], axis1=1, axis2=2) / d for r in rep.results])
        out["M2"] = out["M2"] + extra
    return out, rep.converged, rep.message, time.perf_counter() - t0


def mean_se(a):
    return a.mean(axis=0), a.std(axis=0, ddof=1) / np.sqrt(a.shape[0])


def compare(sim, theory, d, points, quantities=QUANTITIES):
    """One record per (quantity, point): means, standard errors, gap, tolerance, pass."""
    rows = []
    for q in quantities:
        g, g_se = mean_se(sim[q])
        th, th_se = mean_se(theory[q])
        for j, t in enumerate(points):
            allowance = M2_ALLOWANCE / d if q == "M2" else REL_ALLOWANCE * abs(g[j])
            gap = abs(th[j] - g[j])
            tol = 4 * np.hypot(g_se[j], th_se[j]) + allowance
            rows.append(
                {
                    "quantity": q,
                    "t": t,
                    "gd_mean": g[j],
                    "gd_se": g_se[j],
                    "dmft_mean": th[j],
                    "dmft_se": th_se[j],
                    "gap": gap,
                    "allowance": allowance,
                    "tol": tol,
                    "passed": bool(np.isfinite(gap) and gap <= tol),
                }
            )
    return rows


def run_case(args, model, activation, loss, init, sims):
    """Simulate (or reuse ``sims``) and solve one case; returns the case records."""
    lr = args.lr if args.lr is not None else step_size(activation, loss, init)
    net = rmt.TwoLayerNet(args.m, activation=activation, loss=loss)
    points = checkpoints(args.steps)
    key = (activation, loss, init, lr)
    if key not in sims:
        sims[key] = simulate(
            model,
            net,
            args.delta,
            lr,
            args.steps,
            init,
            args.d,
            args.seeds_list,
            args.n_test,
            points,
        )
    sim, diverged, gd_seconds = sims[key]
    hs = [RELU_SMOOTHING, RELU_SMOOTHING / 3] if activation == "relu" else [None]
    cases, theories = [], []
    for h in hs:
        theory, converged, message, dmft_seconds = solve(
            model,
            net,
            args.delta,
            lr,
            args.steps,
            init,
            args.replicas,
            args.draws,
            args.rng,
            RELU_SMOOTHING if h is None else h,
            points,
            d=None if args.no_row else args.d,
        )
        theories.append(theory)
        rows = compare(sim, theory, args.d, points)
        reasons = []
        if diverged:
            reasons.append(f"GD diverged ({diverged}/{len(args.seeds_list)} seeds)")
        if not converged:
            reasons.append(f"DMFT not converged: {message}")
        failed = sorted({LABELS[r["quantity"]] for r in rows if not r["passed"]})
        if failed and not reasons:
            reasons.append("outside tolerance: " + ", ".join(failed))
        cases.append(
            {
                "activation": activation,
                "loss": loss,
                "init": init,
                "lr": lr,
                "steps": args.steps,
                "h": h,
                "rows": rows,
                "passed": not reasons,
                "reason": "; ".join(reasons),
                "gd_seconds": gd_seconds,
                "dmft_seconds": dmft_seconds,
                "note": "; ".join(x for x in (flat_note(sim, theory), loose_note(rows)) if x),
            }
        )
    if len(theories) == 2:
        cases[-1]["note"] = smoothing_note(theories[0], theories[1], cases[-1]["note"])
    return cases


def flat_note(sim, theory):
    """A note when the train loss has not moved (within 1%) by the last point."""
    g = np.nanmean(sim["train"], axis=0)
    if np.all(np.isfinite(g)) and abs(g[-1] - g[0]) <= 0.01 * abs(g[0]):
        return "curves flat over the checkpoints (saddle at W = 0)"
    return ""


#: a tolerance above this fraction of ``|GD mean|`` (``|M|_F^2`` aside) is flagged as loose
LOOSE = 0.25


def loose_note(rows):
    """The points whose tolerance exceeds ``LOOSE |GD mean|``, with the larger standard error
    (a pass there says little)."""
    loose = [
        f"{LABELS[r['quantity']]} t={r['t']} "
        f"({r['tol'] / abs(r['gd_mean']):.2f}, se {'DMFT' if r['dmft_se'] > r['gd_se'] else 'GD'})"
        for r in rows
        if r["quantity"] != "M2" and np.isfinite(r["tol"]) and r["tol"] > LOOSE * abs(r["gd_mean"])
    ]
    return f"loose tol (> {LOOSE:g} x GD): " + ", ".join(loose) if loose else ""


def smoothing_note(a, b, note):
    """The largest ``|DMFT(h) - DMFT(h/3)|`` over quantities and points, in standard errors."""
    worst, where = 0.0, ""
    for q in QUANTITIES:
        ma, sa = mean_se(a[q])
        mb, sb = mean_se(b[q])
        se = np.hypot(sa, sb)
        z = np.abs(ma - mb) / np.where(se > 0, se, np.inf)
        j = int(np.nanargmax(z))
        if z[j] > worst:
            worst, where = float(z[j]), f"{LABELS[q]} at point {j}"
    text = f"h vs h/3: largest difference {worst:.1f} se ({where})"
    return f"{note}; {text}" if note else text


def ratio(case, q):
    """The worst ``gap / tol`` of quantity ``q`` over the points, with its step."""
    rows = [r for r in case["rows"] if r["quantity"] == q]
    r = max(rows, key=lambda r: (r["gap"] / r["tol"]) if np.isfinite(r["gap"]) else np.inf)
    value = r["gap"] / r["tol"] if np.isfinite(r["gap"]) else float("nan")
    mark = "" if r["passed"] else " **x**"
    return f"{value:.2f} (t={r['t']}){mark}"


def h_label(h):
    return "-" if h is None else f"{h:.4g}"


def summary_table(cases):
    head = (
        "| activation | loss | init | lr | T | h | "
        + " | ".join(LABELS[q] for q in QUANTITIES)
        + " | pass | reason / note |"
    )
    lines = [head, "|" + "---|" * (head.count(" | ") + 1)]
    for c in cases:
        note = "; ".join(x for x in (c["reason"], c["note"]) if x)
        lines.append(
            f"| {c['activation']} | {c['loss']} | {c['init']:g} | {c['lr']:g} | {c['steps']} | "
            f"{h_label(c['h'])} | "
            + " | ".join(ratio(c, q) for q in QUANTITIES)
            + f" | {'yes' if c['passed'] else 'NO'} | {note} |"
        )
    return "\n".join(lines)


def fmt(x):
    return "nan" if not np.isfinite(x) else f"{x:.4g}"


def step_table(cases):
    head = (
        "| activation | loss | init | h | t | "
        + " | ".join(f"{LABELS[q]}: GD / DMFT / gap / tol" for q in QUANTITIES)
        + " |"
    )
    lines = [head, "|" + "---|" * (head.count(" | ") + 1)]
    for c in cases:
        for t in sorted({r["t"] for r in c["rows"]}):
            cells = []
            for q in QUANTITIES:
                (r,) = [r for r in c["rows"] if r["quantity"] == q and r["t"] == t]
                mark = "" if r["passed"] else " **x**"
                cells.append(
                    f"{fmt(r['gd_mean'])} ± {fmt(r['gd_se'])} / {fmt(r['dmft_mean'])} ± "
                    f"{fmt(r['dmft_se'])} / {fmt(r['gap'])} / {fmt(r['tol'])}{mark}"
                )
            lines.append(
                f"| {c['activation']} | {c['loss']} | {c['init']:g} | {h_label(c['h'])} | {t} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines)


def write_csv(path, cases):
    fields = [
        "activation",
        "loss",
        "init",
        "lr",
        "steps",
        "h",
        "quantity",
        "t",
        "gd_mean",
        "gd_se",
        "dmft_mean",
        "dmft_se",
        "gap",
        "allowance",
        "tol",
        "passed",
        "case_passed",
        "reason",
    ]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for c in cases:
            for r in c["rows"]:
                w.writerow(
                    {
                        "activation": c["activation"],
                        "loss": c["loss"],
                        "init": c["init"],
                        "lr": c["lr"],
                        "steps": c["steps"],
                        "h": "" if c["h"] is None else c["h"],
                        **{k: r[k] for k in r},
                        "case_passed": c["passed"],
                        "reason": c["reason"],
                    }
                )


def shell(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def write_manifest(path, args, cases, started, wall, other_load, argv):
    cpu = shell("lscpu | grep 'Model name'") or platform.processor()
    cpu = " ".join(cpu.split())
    n_fail = sum(not c["passed"] for c in cases)
    text = f"""# DMFT curves against gradient descent

Command: `python benchmarks/validate_dmft_curves.py {" ".join(argv)}`
(from the repository root, `PYTHONPATH=.`).

Date (`date`, at the start): {started}
CPU (`lscpu | grep 'Model name'`): `{cpu}`, {os.cpu_count()} cores.
Load from other processes during the run: {other_load:.2f} cores (the machine is shared;
the times of single cases in the log vary by up to 8x with it).
Wall time: {wall:.0f} s (gradient descent {sum(c["gd_seconds"] for c in cases if c["h"] != RELU_SMOOTHING / 3):.0f} s, DMFT {sum(c["dmft_seconds"] for c in cases):.0f} s).
Python {platform.python_version()}, numpy {np.__version__}.

Setting: phase retrieval (`y = z^2`), m = {args.m}, delta = {args.delta:g}, T = {args.steps} steps,
points t = {", ".join(str(t) for t in checkpoints(args.steps))}.
Gradient descent: d = {args.d}, seeds {args.seeds_list} (data `1000 + s`, test set of
{args.n_test} samples `2000 + s`, initial weights `3000 + s`).
DMFT: `rmt.dmft_replicas`, {args.replicas} replicas x {args.draws} draws, rng = {args.rng};
{"the d -> inf limit only" if args.no_row else "with the Theta* row (docs/theory.md 7.8): |M|_F^2 adds its mean tr S / d at d = " + str(args.d)}.
Tolerance: `4 sqrt(se_gd^2 + se_dmft^2)` plus {REL_ALLOWANCE:g} x |GD mean| (train, test, grad
norm, tr Q) or {M2_ALLOWANCE:g}/d (`|M|_F^2`, which is 0 in the limit for an even target).
Cases: {len(cases)}, failing: {n_fail}.

| file | what |
|---|---|
| `table.md` | one row per case: the worst `gap / tol` of each quantity over the points (with its step; **x** marks a failure), pass, reason |
| `table_by_step.md` | every point: GD mean ± se / DMFT mean ± se / gap / tol |
| `comparisons.csv` | the same numbers, one line per (case, quantity, point) |
"""
    if os.path.exists(os.path.join(os.path.dirname(path), "investigation.md")):
        text += "| `investigation.md` | the failing cases, looked into (smaller lr, more draws, other d) |\n"
    with open(path, "w") as f:
        f.write(text)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two cases (tanh and relu, Huber, 0.01)")
    p.add_argument("--activations", nargs="+", default=list(ACTIVATIONS), choices=ACTIVATIONS)
    p.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    p.add_argument("--inits", nargs="+", type=float, default=list(INITS))
    p.add_argument("--lr", type=float, default=None, help="one step size for every case")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--delta", type=float, default=4.0)
    p.add_argument("--d", type=int, default=2000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--n-test", type=int, default=20_000)
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--draws", type=int, default=10_000)
    p.add_argument("--rng", type=int, default=0)
    p.add_argument(
        "--no-row",
        action="store_true",
        help="compare with the d -> inf limit only (no Theta* row: |M|^2 = 0 for an even target)",
    )
    p.add_argument("--out", default=None, help="write the tables, CSV and MANIFEST.md here")
    args = p.parse_args(argv)
    if args.quick:
        args.activations, args.losses, args.inits = ["tanh", "relu"], ["huber"], [0.01]
    args.seeds_list = list(range(args.seeds))
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started = shell("date") or datetime.datetime.now().isoformat()
    t0 = time.perf_counter()
    model = rmt.MultiIndexModel("phase_retrieval")
    cases, sims = [], {}
    with LoadMeter() as meter:
        for activation in args.activations:
            for loss in args.losses:
                for init in args.inits:
                    for c in run_case(args, model, activation, loss, init, sims):
                        cases.append(c)
                        print(
                            f"{c['activation']:9s} {c['loss']:6s} init={c['init']:<5g} "
                            f"lr={c['lr']:<5g} h={h_label(c['h']):7s} "
                            f"{'pass' if c['passed'] else 'FAIL'} GD {c['gd_seconds']:.1f} s, "
                            f"DMFT {c['dmft_seconds']:.1f} s {c['reason']}",
                            flush=True,
                        )
    wall = time.perf_counter() - t0
    table = summary_table(cases)
    print()
    print(table)
    print(
        f"\n{sum(not c['passed'] for c in cases)} of {len(cases)} cases fail; {wall:.0f} s "
        f"(other processes: {meter.other_load:.2f} cores)"
    )
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(table + "\n")
        with open(os.path.join(args.out, "table_by_step.md"), "w") as f:
            f.write(step_table(cases) + "\n")
        write_csv(os.path.join(args.out, "comparisons.csv"), cases)
        write_manifest(
            os.path.join(args.out, "MANIFEST.md"),
            args,
            cases,
            started,
            wall,
            meter.other_load,
            argv,
        )
    return cases


if __name__ == "__main__":
    main()
