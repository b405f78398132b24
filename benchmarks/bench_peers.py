"""How does rmt compare with the PyTorch tools people use for Hessians?

Needs the optional extra: ``pip install -e ".[peers]"`` (CPU torch 2.13.0, PyHessian,
hessian-eigenthings, curvlinops).  Without torch it prints a message and exits 0; a missing
package among the others is reported as unavailable.

Same network for everyone: ``f(x) = a^T tanh(W^T x)``, square loss ``(f - y)^2 / 2`` averaged over
the samples, plus ``weight_decay/2 ||W||^2``; the torch parameter is ``W^T`` (``m x d``), whose
row-major flattening is rmt's neuron-major ``vec(W)``.  Printed, in one run:

1. one Hessian-vector product (``n=8000, d=2000, m=4`` by default): rmt's fused product, torch
   autograd double backward with the gradient graph reused (what PyHessian does, timed through
   PyHessian's own ``hessian_vector_product`` and through plain torch), hessian-eigenthings'
   ``HessianOperator`` and curvlinops' ``HessianLinearOperator``;
2. the 5 smallest eigenvalues (smaller ``d`` so that a dense ``eigh`` gives the reference):
   ``rmt.extreme_eigs``, scipy ``eigsh`` on the torch product, hessian-eigenthings' Lanczos with
   and without reorthogonalisation; and PyHessian's top eigenvalues (power iteration for the
   largest ``|lambda|``) against the dense largest-magnitude ones.

Run: ``python benchmarks/bench_peers.py [--threads 2] [--json benchmarks/results/peers.json]``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import sys
import time
import warnings

import numpy as np
from _util import LoadMeter, fmt_ms, measure, set_threads, wait_for_quiet

import rmt

try:
    import torch
except ImportError:  # the [peers] extra is optional
    torch = None


def optional(name):
    """Import ``name`` or return None (the package is reported as unavailable)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=8000)
    p.add_argument("--d", type=int, default=2000)
    p.add_argument("--m", type=int, default=4)
    p.add_argument("--eig-d", type=int, default=1000, help="d of the eigenvalue comparison")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--eig-repeats", type=int, default=3, help="round-robin runs of fast solvers")
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--weight-decay", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--max-tries", type=int, default=3, help="reruns while others' load is high")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a quiet machine")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


class Problem:
    """One Hessian, as rmt sees it and as the torch peers see it (same data, same point)."""

    def __init__(self, n, d, m, weight_decay, rng):
        self.data = rmt.MultiIndexModel("z1z2", noise=0.1).sample(n, d, rng)
        self.net = rmt.TwoLayerNet(m, activation="tanh", loss="square")
        W = rng.standard_normal((d, m)) / np.sqrt(d)
        self.H = rmt.Hessian(self.net, self.data, W, weight_decay=weight_decay)
        self.wd = weight_decay
        self.X = torch.from_numpy(self.data.X)
        self.y = torch.from_numpy(self.data.y)
        self.model = TorchNet(W, self.net.a)

    def loss(self, f, y):
        """The mean loss plus weight decay, as a torch criterion ``(outputs, targets)``."""
        Wt = self.model.Wt
        return 0.5 * ((f - y) ** 2).mean() + 0.5 * self.wd * (Wt * Wt).sum()


def TorchNet(W, a):
    """``f(x) = a^T tanh(W^T x)`` as a torch module with parameter ``Wt = W^T``."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.Wt = torch.nn.Parameter(torch.from_numpy(np.ascontiguousarray(W.T)))
            self.register_buffer("a", torch.from_numpy(a))

        def forward(self, X):
            return torch.tanh(X @ self.Wt.T) @ self.a

    return Net()


class TorchHVP:
    """Autograd double backward with the gradient graph built once and reused (PyHessian-style).

    ``__call__`` takes and returns numpy vectors and counts the products.
    """

    def __init__(self, prob: Problem):
        self.param = prob.model.Wt
        loss = prob.loss(prob.model(prob.X), prob.y)
        (self.grad,) = torch.autograd.grad(loss, self.param, create_graph=True)
        self.count = 0

    def __call__(self, v):
        v = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64).reshape(self.param.shape))
        (hv,) = torch.autograd.grad(self.grad, self.param, grad_outputs=v, retain_graph=True)
        self.count += 1
        return hv.detach().numpy().ravel()


def product_contenders(prob: Problem, rng):
    """Callables ``v -> H v`` of every available peer, each checked against rmt once."""
    H, model, wd = prob.H, prob.model, prob.wd
    out = {
        "rmt Hessian.matvec (fused)": prob.H.matvec,
        "torch autograd, graph reused": TorchHVP(prob),
    }
    pyhessian = optional("pyhessian")
    if pyhessian is not None:
        from pyhessian.utils import hessian_vector_product

        ph = pyhessian.hessian(model, prob.loss, data=(prob.X, prob.y), cuda=False)

        def ph_hvp(v):
            t = [torch.from_numpy(v.reshape(model.Wt.shape))]
            return hessian_vector_product(ph.gradsH, ph.params, t)[0].detach().numpy().ravel()

        out["PyHessian hessian_vector_product"] = ph_hvp
    het = optional("hessian_eigenthings")
    if het is not None:
        op = het.HessianOperator(model, [(prob.X, prob.y)], het.supervised_loss(prob.loss))
        out["hessian-eigenthings HessianOperator"] = lambda v: op.matvec(
            torch.from_numpy(v)
        ).numpy()
    curv = optional("curvlinops")
    if curv is not None:
        mse = torch.nn.MSELoss(reduction="mean")  # (f-y)^2 averaged: twice our loss, no decay
        data = [(prob.X, prob.y)]
        cop = curv.HessianLinearOperator(model, mse, [model.Wt], data)
        out["curvlinops HessianLinearOperator"] = lambda v: (
            0.5 * (cop @ torch.from_numpy(v)).numpy() + wd * v
        )
    v = rng.standard_normal(H.shape[0])
    ref = H.matvec(v)
    errors = {k: float(np.abs(f(v) - ref).max() / np.abs(ref).max()) for k, f in out.items()}
    return out, errors, v


def compare_products(prob: Problem, args, rng):
    """Section 1: one product, every peer, round-robin under the same load."""
    funcs, errors, v = product_contenders(prob, rng)
    if args.wait:
        wait_for_quiet(timeout=args.wait)
    timings, load, tries = measure(
        {k: (lambda f=f: f(v)) for k, f in funcs.items()}, repeats=args.repeats
    )
    base = timings["rmt Hessian.matvec (fused)"]["median"]
    print(
        f"\n1. one product, n={prob.H.n} d={prob.H.d} m={prob.H.m}, median of {args.repeats}; "
        f"other processes' load {load:.2f} cores (try {tries})"
    )
    print(f"{'':38s} {'time':>10s} {'/rmt':>7s} {'max rel diff vs rmt':>20s}")
    for k, t in timings.items():
        print(f"{k:38s} {fmt_ms(t['median'])} {t['median'] / base:7.2f} {errors[k]:20.1e}")
    for pkg in ("pyhessian", "hessian_eigenthings", "curvlinops"):
        if optional(pkg) is None:
            print(f"{pkg}: unavailable (not installed)")
    return {
        "times": {k: t["median"] for k, t in timings.items()},
        "errors": errors,
        "other_load": load,
    }


def dense_reference(prob: Problem, k):
    """The dense spectrum's ``k`` smallest and its extremes, by LAPACK (reference)."""
    import scipy.linalg

    A = prob.H.to_dense()
    lam = scipy.linalg.eigh(A, eigvals_only=True)
    return {
        "smallest": lam[:k],
        "largest_magnitude": lam[np.argsort(-np.abs(lam))[:k]],
        "min": lam[0],
        "max": lam[-1],
        "norm": np.abs(lam).max(),
    }


def rmt_solvers(prob: Problem, args):
    """rmt's 5 smallest as callables: ``extreme_eigs`` by three methods, compiled beforehand.

    If ``rmt.extreme_eigs`` is missing, scipy ``eigsh`` on our ``Hessian.as_linear_operator()``.
    Each callable returns ``(values, seconds, products, converged)``.
    """
    try:
        from rmt.eigen import extreme_eigs
    except ImportError:
        return {
            "rmt operator + scipy eigsh (extreme_eigs missing)": lambda: eigsh_on(
                prob.H.as_linear_operator(), prob.H, args
            )
        }
    warm = Problem(200, 20, prob.H.m, prob.wd, np.random.default_rng(0)).H
    out = {}
    for method in ("lanczos", "block_lanczos", "arpack"):
        extreme_eigs(warm, k=args.k, method=method, tol=args.tol)  # compile outside the timing

        def solve(method=method):
            r = extreme_eigs(prob.H, k=args.k, method=method, tol=args.tol, rng=args.seed)
            return r.values, r.wall_time, r.n_matvec, bool(np.all(r.converged))

        out[f"rmt.extreme_eigs {method}"] = solve
    return out


def eigsh_on(op, counter, args):
    """scipy ``eigsh(op, which="SA")``; ``counter.n_matvec`` or ``counter.count`` counts products."""
    from scipy.sparse.linalg import eigsh

    attr = "n_matvec" if hasattr(counter, "n_matvec") else "count"
    n0 = getattr(counter, attr)
    t0 = time.perf_counter()
    vals = eigsh(op, k=args.k, which="SA", tol=args.tol, return_eigenvectors=False)
    return np.sort(vals), time.perf_counter() - t0, getattr(counter, attr) - n0, True


def run_round_robin(solvers: dict, repeats: int):
    """Run the solvers in turn ``repeats`` times; median wall time, and the load meanwhile."""
    runs = {name: [] for name in solvers}
    with LoadMeter() as meter:
        for _ in range(repeats):
            for name, f in solvers.items():
                runs[name].append(f())
    out = {}
    for name, results in runs.items():
        vals, _, nmv, conv = results[-1]
        out[name] = (vals, float(np.median([r[1] for r in results])), nmv, conv)
    return out, meter.other_load


def run_eigsh_torch(prob: Problem, args):
    """scipy ``eigsh`` (ARPACK, which="SA") on the torch autograd product."""
    from scipy.sparse.linalg import LinearOperator

    hvp = TorchHVP(prob)
    N = prob.H.shape[0]
    return eigsh_on(LinearOperator((N, N), matvec=hvp, dtype=np.float64), hvp, args)


def run_eigenthings(prob: Problem, args, reorthogonalize):
    """hessian-eigenthings' Lanczos (which="SA", 200 steps) on its own HessianOperator."""
    het = optional("hessian_eigenthings")
    op = het.HessianOperator(prob.model, [(prob.X, prob.y)], het.supervised_loss(prob.loss))
    calls = {"n": 0}
    counted = het.LambdaOperator(
        lambda v: (calls.__setitem__("n", calls["n"] + 1), op.matvec(v))[1],
        op.size,
        dtype=op.dtype,
    )
    t0 = time.perf_counter()
    r = het.lanczos(
        counted,
        k=args.k,
        max_iter=200,
        tol=args.tol,
        which="SA",
        reorthogonalize=reorthogonalize,
        seed=args.seed,
    )
    wall = time.perf_counter() - t0
    vals = r.eigenvalues.numpy()
    return np.sort(vals), wall, calls["n"], bool(r.converged.all())


def run_pyhessian(prob: Problem, args):
    """PyHessian's ``eigenvalues(top_n=k)``: power iteration for the largest ``|lambda|``."""
    pyhessian = optional("pyhessian")
    torch.manual_seed(args.seed)
    ph = pyhessian.hessian(prob.model, prob.loss, data=(prob.X, prob.y), cuda=False)
    t0 = time.perf_counter()
    vals, _ = ph.eigenvalues(top_n=args.k)
    return np.asarray(vals), time.perf_counter() - t0, "n/a", "n/a"


def compare_eigensolvers(args, rng):
    """Section 2: the k smallest against dense, and PyHessian's top-|lambda| against dense."""
    prob = Problem(args.n, args.eig_d, args.m, args.weight_decay, rng)
    ref = dense_reference(prob, args.k)
    print(
        f"\n2. {args.k} smallest eigenvalues, n={prob.H.n} d={prob.H.d} m={prob.H.m}, "
        f"tol {args.tol:g}; dense: min {ref['min']:.6g}, max {ref['max']:.6g}"
    )
    fast = rmt_solvers(prob, args)
    fast["scipy eigsh on torch autograd"] = lambda: run_eigsh_torch(prob, args)
    if args.wait:
        wait_for_quiet(timeout=args.wait)
    runs, load = run_round_robin(fast, args.eig_repeats)
    loads = dict.fromkeys(runs, load)
    peers = []
    if optional("hessian_eigenthings") is not None:
        for reorth in (True, False):
            peers.append(
                (
                    f"eigenthings lanczos, reorth {'on' if reorth else 'off'}",
                    lambda r=reorth: run_eigenthings(prob, args, r),
                )
            )
    for name, f in peers:
        with LoadMeter() as meter:
            runs[name] = f()
        loads[name] = meter.other_load
    rows = report_eigs(runs, loads, ref["smallest"], ref["norm"])
    if optional("pyhessian") is not None:
        with LoadMeter() as meter:
            vals, wall, _, _ = run_pyhessian(prob, args)
        err = np.abs(np.sort(np.abs(vals)) - np.sort(np.abs(ref["largest_magnitude"]))).max()
        print(f"PyHessian eigenvalues(top_n={args.k}): {fmt_ms(wall)}, load {meter.other_load:.2f}")
        print(f"  returned  {np.array2string(np.sort(vals), precision=5)}")
        print(
            f"  dense top-|lambda| {np.array2string(np.sort(ref['largest_magnitude']), precision=5)}"
        )
        print(f"  max error in |lambda| / ||H||: {err / ref['norm']:.1e}")
        rows["PyHessian top_n"] = {
            "values": vals.tolist(),
            "time": wall,
            "rel_err": float(err / ref["norm"]),
        }
    else:
        print("pyhessian: unavailable (not installed)")
    return rows


def report_eigs(runs, loads, dense_smallest, norm):
    """Print time, products, converged flag, error against dense and distinct values."""
    first = next(iter(runs))
    print(
        f"{'':44s} {'time':>10s} {'x rmt':>6s} {'products':>8s} {'conv':>5s} "
        f"{'err/||H||':>9s} {'distinct':>8s} {'load':>5s}"
    )
    rows = {}
    for name, (vals, wall, nmv, conv) in runs.items():
        err = float(np.abs(np.sort(vals) - dense_smallest).max() / norm)
        distinct = len(np.unique(np.round(vals / (1e-8 * norm))))
        print(
            f"{name:44s} {fmt_ms(wall)} {wall / runs[first][1]:6.2f} {nmv!s:>8s} "
            f"{conv!s:>5s} {err:9.1e} {distinct:8d} {loads[name]:5.2f}"
        )
        rows[name] = {
            "values": np.asarray(vals).tolist(),
            "time": wall,
            "products": nmv,
            "converged": conv,
            "rel_err": err,
            "distinct": distinct,
            "other_load": loads[name],
        }
    return rows


def main(argv=None):
    if torch is None:
        print(
            "bench_peers: torch is not installed; install the optional extra with "
            "pip install -e '.[peers]'. Nothing to compare: exiting."
        )
        return 0
    args = parse_args(argv)
    # PyHessian calls backward(create_graph=True); torch warns about the reference cycle
    warnings.filterwarnings("ignore", message="Using backward", category=UserWarning)
    threads = set_threads(args.threads)
    torch.set_num_threads(args.threads)
    versions = {}
    for dist in ("torch", "PyHessian", "hessian-eigenthings", "curvlinops-for-pytorch"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "unavailable"
    print(
        f"threads: numba {threads['numba']}, BLAS {threads['blas']}, "
        f"torch {torch.get_num_threads()}; versions {versions}"
    )
    rng = np.random.default_rng(args.seed)
    report = {"args": vars(args), "versions": versions}
    report["products"] = compare_products(
        Problem(args.n, args.d, args.m, args.weight_decay, rng), args, rng
    )
    report["eigen"] = compare_eigensolvers(args, rng)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
