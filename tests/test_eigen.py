"""rmt.extreme_eigs against dense eigh on real Hessians (m*d = 3000) and on hard cases."""

import numpy as np
import pytest
from scipy.sparse.linalg import LinearOperator

import rmt
from rmt.eigen.solvers import METHODS

EPS = np.finfo(np.float64).eps
TOL = 1e-10


def _have_primme():
    try:
        import primme  # noqa: F401
    except ImportError:
        return False
    return True


NEEDS_PRIMME = pytest.mark.skipif(
    not _have_primme(),
    reason="optional primme not installed (no wheel; it builds from source: apt-get install "
    "libopenblas-dev liblapack-dev && pip install primme)",
)


def _method_param(method, *marks):
    """``method`` as a pytest param; primme is skipped, with the install recipe, when absent."""
    marks = list(marks) + ([NEEDS_PRIMME] if method == "primme" else [])
    return pytest.param(method, marks=marks, id=method)


AVAILABLE = [_method_param(m) for m in METHODS]


def _hessian(activation, d=750, m=4, seed=3):
    data = rmt.MultiIndexModel("phase_retrieval").sample(4 * d, d, rng=seed)
    W = np.random.default_rng(seed + 1).standard_normal((d, m)) / np.sqrt(d)
    return rmt.Hessian(rmt.TwoLayerNet(m, activation, "square"), data, W)


_REFERENCES = {}


def _hessian_case(activation, d):
    """A Hessian with m = 4 and its full dense eigendecomposition (the reference), cached."""
    if (activation, d) not in _REFERENCES:
        H = _hessian(activation, d=d)
        values, vectors = np.linalg.eigh(H.to_dense())
        _REFERENCES[activation, d] = (H, values, vectors)
    return _REFERENCES[activation, d]


@pytest.fixture(scope="module", params=["tanh", "quadratic"])
def hessian_case(request):
    """A small Hessian, m*d = 600, for the fast suite."""
    return _hessian_case(request.param, 150)


def assert_pairs_match(result, values, vectors, which, tol=TOL):
    """Values to 1e-8 relative, residuals within tol*||A||, vectors within Davis-Kahan."""
    k = result.k
    idx = np.arange(k) if which == "smallest" else np.arange(len(values) - k, len(values))
    ref = values[idx]
    anorm = np.max(np.abs(values))
    np.testing.assert_allclose(result.values, ref, rtol=1e-8, atol=0)
    assert np.all(result.residuals <= tol * anorm)
    for c, i in enumerate(idx):
        v = result.vectors[:, c]
        assert abs(np.linalg.norm(v) - 1) < 1e-10
        others = np.delete(values, i)
        gap = np.min(np.abs(others - result.values[c]))
        u = vectors[:, i]
        sin_angle = np.linalg.norm(v - (u @ v) * u)
        bound = result.residuals[c] / gap + 1e3 * EPS * anorm / gap
        assert sin_angle <= bound, (c, sin_angle, bound)


@pytest.mark.parametrize("which", ["smallest", "largest"])
@pytest.mark.parametrize("method", AVAILABLE)
def test_methods_agree_with_dense_eigh_on_hessian(hessian_case, method, which):
    H, values, vectors = hessian_case
    result = rmt.extreme_eigs(H, k=5, which=which, method=method, tol=TOL, rng=11)
    assert result.method == method
    assert result.converged.all() and result.converged.shape == (5,)
    assert result.n_matvec >= 5 and result.wall_time > 0
    assert_pairs_match(result, values, vectors, which)


CI_SUBSET = {("tanh", "lanczos"), ("tanh", "block_lanczos"), ("tanh", "arpack")}
LARGE_CASES = [
    pytest.param(
        act,
        method,
        marks=[pytest.mark.slow]
        + ([pytest.mark.ci] if (act, method) in CI_SUBSET else [])
        + ([NEEDS_PRIMME] if method == "primme" else []),
    )
    for act in ("tanh", "quadratic")
    for method in METHODS
]


@pytest.mark.parametrize("activation, method", LARGE_CASES)
def test_methods_agree_with_dense_eigh_on_hessian_3000(activation, method):
    """A Hessian of m*d = 3000, both ends, against a full dense eigh."""
    H, values, vectors = _hessian_case(activation, 750)
    for which in ("smallest", "largest"):
        result = rmt.extreme_eigs(H, k=5, which=which, method=method, tol=TOL, rng=12)
        assert_pairs_match(result, values, vectors, which)


def test_primme_missing_says_so():
    if _have_primme():
        pytest.skip("primme is installed; it is tested with the other methods")
    with pytest.raises(ImportError, match="primme"):
        rmt.extreme_eigs(np.diag(np.arange(20.0)), k=2, method="primme")


# ---- hard cases on dense matrices with a known spectrum -------------------------------------


def _with_spectrum(spectrum, rng):
    """``U diag(spectrum) U^T`` with a Haar-random orthogonal ``U``; returns (A, U)."""
    N = len(spectrum)
    U, R = np.linalg.qr(rng.standard_normal((N, N)))
    U *= np.sign(np.diag(R))
    A = (U * spectrum) @ U.T
    return 0.5 * (A + A.T), U


@pytest.mark.parametrize("method", AVAILABLE)
def test_clustered_eigenvalues(method, rng):
    spectrum = np.concatenate([1.0 + 1e-5 * np.arange(4), np.linspace(1.5, 10.0, 296)])
    A, _ = _with_spectrum(spectrum, rng)
    result = rmt.extreme_eigs(A, k=4, method=method, tol=TOL, rng=5)
    np.testing.assert_allclose(result.values, spectrum[:4], rtol=1e-8)
    assert np.all(result.residuals <= TOL * 10.0)


@pytest.mark.parametrize("method", ["block_lanczos", "lobpcg", "dense"])
def test_exactly_repeated_eigenvalue_both_copies(method, rng):
    spectrum = np.concatenate([[-2.0, -2.0], np.linspace(-1.0, 5.0, 198)])
    A, U = _with_spectrum(spectrum, rng)
    result = rmt.extreme_eigs(A, k=3, method=method, tol=TOL, rng=6)
    np.testing.assert_allclose(result.values, [-2.0, -2.0, -1.0], rtol=1e-8)
    eigenspace = U[:, :2]
    captured = np.linalg.norm(eigenspace.T @ result.vectors[:, :2], axis=0)
    np.testing.assert_allclose(captured, 1.0, atol=1e-8)


def test_lanczos_single_vector_with_repeated_eigenvalue_returns_true_pairs(rng):
    """Single-vector Krylov may see one copy only; whatever it returns must be true pairs."""
    spectrum = np.concatenate([[-2.0, -2.0], np.linspace(-1.0, 5.0, 198)])
    A, _ = _with_spectrum(spectrum, rng)
    result = rmt.extreme_eigs(A, k=3, method="lanczos", tol=TOL, rng=6)
    assert result.values[0] == pytest.approx(-2.0, rel=1e-8)
    assert np.all(np.min(np.abs(result.values[:, None] - spectrum), axis=1) <= 1e-8)


@pytest.mark.parametrize("method", AVAILABLE)
@pytest.mark.parametrize("which", ["smallest", "largest"])
def test_k_close_to_size(method, which, rng):
    spectrum = np.sort(rng.standard_normal(40))
    A, _ = _with_spectrum(spectrum, rng)
    k = 39 if method in ("arpack", "lobpcg") else 40
    result = rmt.extreme_eigs(A, k=k, which=which, method=method, tol=TOL, rng=7)
    ref = spectrum[:k] if which == "smallest" else spectrum[-k:]
    np.testing.assert_allclose(result.values, ref, rtol=1e-8, atol=1e-12)
    assert np.all(result.residuals <= TOL * np.max(np.abs(spectrum)))


@pytest.mark.parametrize("method", AVAILABLE)
def test_outlier_far_below_bulk(method, rng):
    """Marchenko-Pastur bulk in [0.09, 2.9] with a spike at about -50."""
    N, n = 400, 800
    X = rng.standard_normal((n, N))
    u = rng.standard_normal(N)
    u /= np.linalg.norm(u)
    A = X.T @ X / n - 50.0 * np.outer(u, u)
    A = 0.5 * (A + A.T)
    values, vectors = np.linalg.eigh(A)
    result = rmt.extreme_eigs(A, k=3, method=method, tol=TOL, rng=8)
    assert values[0] < -45
    assert_pairs_match(result, values, vectors, "smallest")


def test_linear_operator_input_counts_products(rng):
    spectrum = np.linspace(-3.0, 3.0, 200)
    A, _ = _with_spectrum(spectrum, rng)
    calls = []

    def mv(v):
        calls.append(1)
        return A @ v

    op = LinearOperator(A.shape, matvec=mv, dtype=np.float64)
    result = rmt.extreme_eigs(op, k=2, which="largest", method="lanczos", tol=TOL, rng=9)
    np.testing.assert_allclose(result.values, spectrum[-2:], rtol=1e-8)
    assert len(calls) == result.n_matvec + 2  # +2: the symmetry check


@pytest.mark.parametrize("method", ["lanczos", "block_lanczos", "arpack", "lobpcg"])
def test_iterative_methods_run_blas_on_one_thread(method, rng):
    """Every product of an iterative method (and the final check) runs with BLAS on one
    thread: OpenBLAS threads left spinning after a call slow the Numba product that follows."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    A, _ = _with_spectrum(np.linspace(-3.0, 3.0, 120), rng)
    threads = []

    def mv(v):
        info = threadpoolctl.threadpool_info()
        threads.append(max((p["num_threads"] for p in info if p["user_api"] == "blas"), default=1))
        return A @ v

    op = LinearOperator(A.shape, matvec=mv, dtype=np.float64)
    # BLAS on two threads around the call (a pytest-xdist worker runs on one: conftest.py)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        info = threadpoolctl.threadpool_info()
        if max((p["num_threads"] for p in info if p["user_api"] == "blas"), default=1) < 2:
            pytest.skip("BLAS does not run on two threads here: nothing to limit")
        result = rmt.extreme_eigs(op, k=2, method=method, tol=1e-8, rng=4)
    np.testing.assert_allclose(result.values, [-3.0, -3.0 + 6.0 / 119], rtol=1e-8)
    assert len(threads) == result.n_matvec + 2  # +2: the symmetry check, outside the solver
    assert threads[:2] == [2, 2] and max(threads[2:]) == 1


# ---- errors and honest convergence status ----------------------------------------------------


def test_bad_input_raises(rng):
    A = np.diag(np.arange(1.0, 11.0))
    with pytest.raises(ValueError, match="symmetric"):
        rmt.extreme_eigs(A + np.triu(np.ones((10, 10)), 1), k=2)
    nonsym = np.triu(rng.standard_normal((10, 10)))
    with pytest.raises(ValueError, match="symmetric"):
        rmt.extreme_eigs(LinearOperator((10, 10), matvec=lambda v: nonsym @ v), k=2)
    with pytest.raises(ValueError, match="1 <= k <= 10"):
        rmt.extreme_eigs(A, k=11)
    with pytest.raises(ValueError, match="1 <= k <= 10"):
        rmt.extreme_eigs(A, k=0)
    with pytest.raises(ValueError, match="1 <= k <= 9"):
        rmt.extreme_eigs(A, k=10, method="arpack")
    with pytest.raises(ValueError, match="unknown method 'qr'"):
        rmt.extreme_eigs(A, k=2, method="qr")
    with pytest.raises(ValueError, match="unknown which"):
        rmt.extreme_eigs(A, k=2, which="middle")
    with pytest.raises(ValueError, match="square"):
        rmt.extreme_eigs(np.ones((3, 4)), k=2)
    with pytest.raises(TypeError, match="LinearOperator"):
        rmt.extreme_eigs([[1.0, 0.0], [0.0, 2.0]], k=1)
    with pytest.raises(ValueError, match="tol"):
        rmt.extreme_eigs(A, k=2, tol=-1.0)
    with pytest.raises(ValueError, match="unknown option.*'ncv'"):
        rmt.extreme_eigs(A, k=2, method="dense", ncv=5)
    with pytest.raises(ValueError, match="ncv must be >="):
        rmt.extreme_eigs(A, k=2, method="lanczos", ncv=3)


@pytest.mark.parametrize(
    "method", [_method_param(m) for m in ("lanczos", "block_lanczos", "arpack", "primme")]
)
def test_no_convergence_raises_with_converged_pairs_only(method, rng):
    spectrum = np.concatenate([np.linspace(0.0, 1e-3, 6), np.linspace(1.0, 2.0, 994)])
    A, _ = _with_spectrum(spectrum, rng)
    limited = {"maxiter": 2}
    options = {"arpack": limited, "primme": limited}.get(method, {"max_restarts": 0, "ncv": 12})
    with pytest.raises(rmt.NoConvergenceError) as info:
        rmt.extreme_eigs(A, k=6, method=method, tol=1e-12, rng=10, **options)
    partial = info.value.result
    assert partial.k < 6
    assert np.all(partial.converged)
    assert np.all(partial.residuals <= 1e-12 * partial.norm_estimate)
    for lam in partial.values:
        assert np.min(np.abs(spectrum - lam)) <= 1e-10


def test_overlaps_against_projection(rng):
    m, d = 3, 50
    theta, _ = np.linalg.qr(rng.standard_normal((d, 2)))
    V = rng.standard_normal((m * d, 4))
    V /= np.linalg.norm(V, axis=0)
    P = np.kron(np.eye(m), theta @ theta.T)  # projector onto R^m (x) span(theta)
    expected = np.einsum("nc,nk,kc->c", V, P, V)
    np.testing.assert_allclose(rmt.overlaps(V, theta, m), expected, rtol=1e-12)
    # span only matters; a single column works as a 1-d vector
    np.testing.assert_allclose(rmt.overlaps(V, theta @ [[2.0, 1.0], [0.0, 3.0]], m), expected)
    single = rmt.overlaps(V[:, 0], theta[:, 0], m)
    np.testing.assert_allclose(
        single, [V[:, 0] @ np.kron(np.eye(m), np.outer(*[theta[:, 0]] * 2)) @ V[:, 0]]
    )
    with pytest.raises(ValueError, match="m\\*d"):
        rmt.overlaps(V, theta, 4)
