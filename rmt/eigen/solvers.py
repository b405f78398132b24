"""``extreme_eigs``: the few smallest or largest eigenpairs of a symmetric operator.

Every method sees the same problem, "the ``k`` smallest eigenpairs of ``sign * A``", through a
:class:`~rmt.eigen.inputs.CountingOperator`, and every answer is checked the same way: the
true residuals ``||A v - lambda v||`` must be at most ``tol * ||A||_est``.  ``A v`` comes from
one extra product, except for our Lanczos methods, which keep the products of their basis
(``A V = (A Q) Y``: the same numbers up to rounding, without another pass over the data).
Pairs that fail are never returned; the solver raises
:class:`~rmt.eigen.result.NoConvergenceError` carrying those that passed.
"""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import ArpackNoConvergence, eigsh, lobpcg
from threadpoolctl import threadpool_limits

from rmt.eigen.inputs import CountingOperator, check_operator
from rmt.eigen.lanczos import estimate_norm, thick_restart_lanczos
from rmt.eigen.result import EigResult, NoConvergenceError
from rmt.kernels.threads import adaptive_threads, single_threaded_blas
from rmt.validation import check_choice

METHODS = ("lanczos", "block_lanczos", "arpack", "lobpcg", "primme", "dense")
WHICH = ("smallest", "largest")


@adaptive_threads
def extreme_eigs(A, k=5, which="smallest", method="lanczos", tol=1e-10, rng=None, **options):
    """The ``k`` smallest (or largest) eigenpairs of a symmetric ``A``.

    Parameters
    ----------
    A : rmt.Hessian (or any rmt.operators.base.SymmetricOperator), scipy LinearOperator, ndarray
        or scipy sparse matrix
        Symmetric, float64.  A dense array or a sparse matrix is checked for symmetry exactly
        (a sparse one is multiplied in its sparse form); an operator whose
        ``symmetric`` flag is ``True`` is trusted; any other operator is checked on a random
        pair of vectors (two products, not counted).
    k : int
        Number of pairs: ``1 <= k <= N`` (``k < N`` for ``"arpack"`` and ``"lobpcg"``).
    which : {"smallest", "largest"}
    method : {"lanczos", "block_lanczos", "arpack", "lobpcg", "primme", "dense"}
        ``"lanczos"``: our thick-restart Lanczos with full reorthogonalisation (one vector per
        product; it cannot see a second copy of an exactly repeated eigenvalue).
        ``"block_lanczos"``: the same with a block of vectors per product (default block
        ``min(k, 2)``), one pass over ``X`` per step for a Hessian.  ``"arpack"``:
        ``scipy.sparse.linalg.eigsh``.  ``"lobpcg"``: scipy.  ``"primme"``: the optional
        ``primme`` package, run on one thread.  ``"dense"``: LAPACK ``eigh`` with
        ``subset_by_index`` on the assembled matrix.
    tol : float
        Convergence: ``||A v - lambda v|| <= tol * ||A||_est`` for every returned pair.
    rng : None, int or numpy Generator
        Seeds the starting vectors.
    **options
        Method-specific: ``ncv``, ``keep``, ``block``, ``max_restarts`` (ours), ``ncv`` and
        ``maxiter`` (arpack), ``block`` and ``maxiter`` (lobpcg, primme).

    Returns
    -------
    EigResult
        Values sorted ascending, vectors ``(N, k)``, true residuals, product counts.

    Raises
    ------
    ValueError
        Non-symmetric ``A``, ``k`` out of range, unknown ``which``/``method``/options.
    NoConvergenceError
        When fewer than ``k`` pairs meet ``tol``; it carries the converged ones.

    Notes
    -----
    See docs/theory.md section 2.5 (the empirical spectrum).

    Examples
    --------
    The bottom of the spectrum of a small Hessian, against dense ``eigvalsh``:

    >>> import numpy as np
    >>> import rmt
    >>> data = rmt.MultiIndexModel("phase_retrieval").sample(500, 50, rng=0)
    >>> net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    >>> W = np.random.default_rng(1).standard_normal((50, 2)) / np.sqrt(50)
    >>> H = rmt.Hessian(net, data, W)
    >>> res = rmt.extreme_eigs(H, k=3, rng=0)
    >>> bool(np.allclose(res.values, np.linalg.eigvalsh(H.to_dense())[:3], atol=1e-8))
    True
    >>> bool(np.all(res.residuals <= 1e-10 * res.norm_estimate))
    True
    """
    start = time.perf_counter()
    check_choice(method, "method", METHODS)
    check_choice(which, "which", WHICH)
    tol = _check_tol(tol)
    rng = np.random.default_rng(rng)
    A = check_operator(A, rng)
    N = A.shape[0]
    k_max = N - 1 if method in ("arpack", "lobpcg") else N
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer; got {k!r}")
    if not 1 <= k <= k_max:
        raise ValueError(f"k must satisfy 1 <= k <= {k_max} for method {method!r}; got {k}")
    _check_options(method, options)
    op = CountingOperator(A, sign=1.0 if which == "smallest" else -1.0)
    # BLAS on one thread for the iterative methods (PRIMME sets its own, dense keeps all): their
    # dense work is small (``eigh`` of ``ncv x ncv``, thin products with the basis), and OpenBLAS
    # threads spinning after a call slow the Numba product that follows (benchmarks/RESULTS.md)
    blas = contextlib.nullcontext() if method in ("dense", "primme") else single_threaded_blas()
    with blas:
        values, vectors, norm_est, products = _SOLVERS[method](op, int(k), tol, rng, **options)
        return _verify(op, values, vectors, norm_est, tol, method, start, int(k), products)


def _check_options(method, options):
    """Unknown method options are a ``ValueError`` naming the ones the method accepts."""
    params = list(inspect.signature(_SOLVERS[method]).parameters)[4:]
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown} for method {method!r}; it accepts {params or 'none'}"
        )


def _check_tol(tol):
    tol = float(tol)
    if not np.isfinite(tol) or tol <= 0:
        raise ValueError(f"tol must be a finite positive number; got {tol!r}")
    return tol


def _verify(op, values, vectors, norm_est, tol, method, start, k, products=None):
    """True residuals; keep the pairs within ``tol * ||A||_est``, or raise.

    ``products`` is ``A vectors`` when the solver has it from its own products; otherwise
    (``None``) it costs one product here.
    """
    order = np.argsort(values, kind="stable")
    values, vectors = (
        np.asarray(values, float)[order],
        np.asarray(vectors, float)[:, order],
    )
    if not len(values):
        products = vectors
    elif products is None:
        products = op.matmat(vectors)
    else:
        products = np.asarray(products, float)[:, order]
    residuals = np.linalg.norm(products - vectors * values, axis=0)
    scale = max(float(norm_est), float(np.max(np.abs(values), initial=0.0)))
    converged = residuals <= tol * scale
    if op.sign < 0:  # pairs of -A, smallest first, become pairs of A, sorted ascending
        values, vectors = -values[::-1], vectors[:, ::-1]
        residuals, converged = residuals[::-1], converged[::-1]
    ok = len(values) == k and bool(np.all(converged))
    keep = slice(None) if ok else converged

    def result(sel):
        return EigResult(
            values=values[sel].copy(),
            vectors=vectors[:, sel].copy(),
            residuals=residuals[sel].copy(),
            n_matvec=op.n_matvec,
            n_passes=op.n_passes,
            converged=converged[sel].copy(),
            method=method,
            wall_time=time.perf_counter() - start,
            norm_estimate=scale,
        )

    if ok:
        return result(keep)
    raise NoConvergenceError(
        f"{method}: {int(np.sum(converged))} of {k} eigenpairs met tol={tol:g} * "
        f"||A||_est={scale:.3e} after {op.n_matvec} products; {_residual_note(residuals, k)}",
        result(keep),
    )


def _residual_note(residuals, k) -> str:
    """What the residuals of a failed solve say, never "nan": how many pairs the solver
    returned, the largest finite residual, and how many were not finite."""
    residuals = np.asarray(residuals, float)
    finite = residuals[np.isfinite(residuals)]
    if not residuals.size:
        return f"the solver returned no candidate pairs (of {k})"
    note = f"{residuals.size} candidate pair(s) returned"
    if finite.size:
        note += f", largest residual {float(np.max(finite)):.3e}"
    if finite.size < residuals.size:
        note += f", {residuals.size - finite.size} with a non-finite residual"
    return note


def _default_ncv(k, block, N):
    """Basis size of our Lanczos: room for ``k`` kept vectors plus several blocks.

    64 vectors for one vector per product, 40 blocks otherwise (80 for the default block of
    2), so that a larger block does not restart sooner in steps than a smaller one."""
    ncv = max(2 * k + 2 * block, 64 if block == 1 else 40 * block)
    if ncv + block >= N or k + 2 * block > N:
        ncv = -(-N // block) * block  # the whole space, in whole blocks
    return ncv


def _solve_lanczos(op, k, tol, rng, ncv=None, keep=None, block=1, max_restarts=500):
    """Our thick-restart Lanczos (``block=1``) or block Lanczos (``block>1``)."""
    N = op.shape[0]
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be a positive integer; got {block!r}")
    block = int(min(block, N))
    ncv = _default_ncv(k, block, N) if ncv is None else int(ncv)
    if ncv < min(N, k + 2 * block):
        raise ValueError(f"ncv must be >= k + 2*block = {k + 2 * block}; got {ncv}")
    out = thick_restart_lanczos(op, k, block, ncv, tol, max_restarts, rng, keep=keep)
    c = out.converged
    products = None if out.products is None else out.products[:, c]
    return out.values[c], out.vectors[:, c], out.norm_estimate, products


def _solve_block_lanczos(op, k, tol, rng, block=None, ncv=None, keep=None, max_restarts=500):
    """Block Lanczos; a block of ``b`` finds up to ``b`` copies of a repeated eigenvalue.

    The default block is ``min(k, 2)``: a larger block needs fewer passes, but a Hessian
    product on ``b`` vectors costs more than one on a single vector, and beyond ``b = 2`` the
    saving in passes no longer pays for the dearer product (benchmarks/RESULTS.md)."""
    block = min(k, 2) if block is None else block
    return _solve_lanczos(op, k, tol, rng, ncv, keep, block, max_restarts)


def _solve_arpack(op, k, tol, rng, ncv=None, maxiter=None):
    """``scipy.sparse.linalg.eigsh`` (ARPACK), ``which="SA"``; its test is
    ``||r|| <= tol |theta|``."""
    v0 = rng.standard_normal(op.shape[0])
    try:
        values, vectors = eigsh(
            op.as_linear_operator(),
            k=k,
            which="SA",
            tol=tol,
            v0=v0,
            ncv=ncv,
            maxiter=maxiter,
        )
    except ArpackNoConvergence as exc:
        values, vectors = exc.eigenvalues, exc.eigenvectors
    return values, vectors, float(np.max(np.abs(values), initial=0.0)), None


def _solve_lobpcg(op, k, tol, rng, block=None, maxiter=1000):
    """scipy ``lobpcg`` with ``block`` (default ``k + 2``) vectors; its tolerance is absolute,
    so ``||A||`` is first estimated by 12 Lanczos steps (counted)."""
    N = op.shape[0]
    block = min(k + 2, N - 1) if block is None else int(block)
    if not k <= block < N:
        raise ValueError(f"lobpcg block must satisfy k <= block < N = {N}; got {block}")
    anorm = estimate_norm(op, rng)
    X0 = rng.standard_normal((N, block))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values, vectors = lobpcg(
            op.as_linear_operator(), X0, tol=tol * anorm, maxiter=maxiter, largest=False
        )
    order = np.argsort(values)[:k]
    return values[order], vectors[:, order], anorm, None


def _solve_primme(op, k, tol, rng, block=None, maxiter=None):
    """PRIMME (optional package), one thread; its test is ``||r|| <= tol ||A||_est`` with
    its own ``||A||_est`` (``estimateLargestSVal``, the largest ``|theta|`` it has seen), which
    is also the scale of our final check.  Only the pairs it reports converged come back."""
    try:
        import primme
    except ImportError as exc:
        raise ImportError(PRIMME_MISSING) from exc
    options = {} if block is None else {"maxBlockSize": int(block)}
    v0 = rng.standard_normal((op.shape[0], 1))
    with threadpool_limits(1):
        values, vectors, stats = primme.eigsh(
            op.as_linear_operator(), k=k, which="SA", tol=tol, v0=v0, maxiter=maxiter,
            return_stats=True, raise_for_unconverged=False, **options,
        )  # fmt: skip
    anorm = max(
        float(stats.get("estimateLargestSVal", 0.0)),
        float(np.max(np.abs(values), initial=0.0)),
    )
    return values, vectors, anorm, None


PRIMME_MISSING = (
    'method="primme" needs the optional primme package, which is not installed (it has no '
    "wheel here and builds from source: apt-get install libopenblas-dev liblapack-dev, then "
    "pip install primme); use another method"
)


def _solve_dense(op, k, tol, rng):
    """LAPACK ``eigh`` (``evr``) with ``subset_by_index``; ``||A||`` bounded by ``min(||A||_1,
    ||A||_F)``.  The matrix comes from ``op.to_dense()``: the array itself, the reference
    assembly of an operator that declares itself symmetric (``rmt.Hessian``), or products on
    the identity for any other operator."""
    A = op.to_dense()
    values, vectors = scipy.linalg.eigh(A, subset_by_index=[0, k - 1], driver="evr")
    bound = min(float(np.max(np.sum(np.abs(A), axis=0))), float(np.linalg.norm(A)))
    return values, vectors, bound, None


_SOLVERS = {
    "lanczos": _solve_lanczos,
    "block_lanczos": _solve_block_lanczos,
    "arpack": _solve_arpack,
    "lobpcg": _solve_lobpcg,
    "primme": _solve_primme,
    "dense": _solve_dense,
}
