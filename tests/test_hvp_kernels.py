"""Fused Hessian-vector kernels against the obvious numpy product (docs/theory.md section 2).

Every kernel (the generic ``hvp_fused``, each unrolled ``hvp_m{m}`` and the pipelined
``hvp_m{m}_p4``; those that this CPU's path does not dispatch with the slow tests) and the
dispatch in ``Hessian.matmat`` are compared with ``X^T R`` where ``r_i = (x_i^T V) D_i`` is
computed by numpy, for widths ``m = 1..6``, blocks of ``b = 1, 3, 8`` vectors, and a number of
rows that is odd and not a multiple of the rows per step or per panel, so that every remainder
path runs.
"""

import pathlib
import sys

import numpy as np
import pytest

import rmt
from rmt.kernels._generated.hvp_small import KERNELS, PIPELINED
from rmt.kernels.dispatch import TABLE, default_target
from rmt.kernels.hessian import PANEL_ROWS, ROWS_PER_STEP, hvp_fused, hvp_kernel
from rmt.kernels.simd import simd4_c4

# the generators live in tools/ (run as scripts: ``python tools/gen_*.py``)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import gen_hvp_small as gen
from codegen import GENERATED, same_syntax

RTOL = 1e-12
N_ROWS = 2 * PANEL_ROWS * 3 + ROWS_PER_STEP + 3  # 103: odd, no multiple of 4, 8 or 16
WIDTHS = [1, 2, 3, 4, 5, 6]
BLOCKS = [1, 3, 8]


def numpy_product(X, D, Vt):
    """``sum_i x_i r_i^T`` per vector, ``r_i = (x_i^T V) D_i``: numpy, no fusion (reference)."""
    m = D.shape[1]
    b = Vt.shape[0] // m
    out = np.empty_like(Vt)
    for c in range(b):
        V = Vt[c * m : (c + 1) * m].T  # d x m
        U = X @ V
        R = np.einsum("ij,ijk->ik", U, D)
        out[c * m : (c + 1) * m] = (X.T @ R).T
    return out


def assert_close(got, ref):
    scale = np.abs(ref).max()
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=RTOL * scale)


def random_problem(m, b, rng, n=N_ROWS, d=23):
    X = rng.standard_normal((n, d))
    A = rng.standard_normal((n, m, m))
    D = A + A.transpose(0, 2, 1)
    Vt = rng.standard_normal((b * m, d))
    return X, D, Vt


def pipelined_on(target, m):
    """Whether ``target`` dispatches the pipelined kernel for one vector of width ``m``."""
    return ("hvp", target, f"1 vector, m = {m}") in TABLE


#: the pipelined kernels this CPU's path dispatches (one vector of m); the others run in the
#: slow tests
PIPELINED_HERE = [m for m in PIPELINED if pipelined_on(default_target(), m)]
PIPELINED_ELSEWHERE = [m for m in PIPELINED if m not in PIPELINED_HERE]


def kernels_for(m):
    """The generic kernel, plus the unrolled one when ``m`` has one, plus the pipelined one
    where this CPU's path dispatches it."""
    out = [("generic", hvp_fused)]
    if m in KERNELS:
        out.append((f"hvp_m{m}", KERNELS[m]))
    if m in PIPELINED_HERE:
        out.append((f"hvp_m{m}_p", PIPELINED[m]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("m", PIPELINED_ELSEWHERE or [pytest.param(0, marks=pytest.mark.skip)])
def test_pipelined_kernels_of_other_paths_match_numpy(m, rng):
    """The pipelined kernels that another CPU's path dispatches, as ``test_kernels_match_numpy``
    and ``test_kernels_few_rows`` test those of this one."""
    for b, n, d in [(1, N_ROWS, 23), (3, N_ROWS, 23), (8, N_ROWS, 23), (3, 1, 7), (3, 5, 7)]:
        X, D, Vt = random_problem(m, b, rng, n=n, d=d)
        ref = numpy_product(X, D, Vt)
        for n_chunks in (1, 2, 3, 4):
            assert_close(PIPELINED[m](X, D, Vt, n_chunks), ref)


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("b", BLOCKS)
@pytest.mark.parametrize("n_chunks", [1, 2, 3])
def test_kernels_match_numpy(m, b, n_chunks, rng):
    X, D, Vt = random_problem(m, b, rng)
    ref = numpy_product(X, D, Vt)
    for name, kernel in kernels_for(m):
        got = kernel(X, D, Vt, n_chunks)
        assert got.shape == Vt.shape, name
        assert_close(got, ref)


@pytest.mark.parametrize("m", WIDTHS)
def test_kernels_few_rows(m, rng):
    """Fewer rows than chunks, and than one step: empty chunks and remainder-only paths."""
    for n in (1, 2, 5):
        X, D, Vt = random_problem(m, 3, rng, n=n, d=7)
        ref = numpy_product(X, D, Vt)
        for _, kernel in kernels_for(m):
            assert_close(kernel(X, D, Vt, 4), ref)


def test_dispatch_uses_unrolled_kernels_for_small_m():
    for m in (1, 2, 3, 4):
        for target in ("avx512", "avx2", "portable"):
            if (m, target) == (4, "avx2"):  # 4 columns: the 4-lane kernel of simd.py
                assert hvp_kernel(m, target=target) is simd4_c4
            elif pipelined_on(target, m):  # one vector: the pipelined kernel
                assert hvp_kernel(m, target=target) is PIPELINED[m]
                assert hvp_kernel(m, 3 * m, target=target) is KERNELS[m]  # a block: unrolled
            else:
                assert hvp_kernel(m, target=target) is KERNELS[m]
    for m in (5, 6, 17):
        assert hvp_kernel(m) is hvp_fused


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("b", BLOCKS)
@pytest.mark.parametrize("weight_decay", [0.0, 0.37])
def test_hessian_matmat_matches_numpy(m, b, weight_decay, rng):
    """``Hessian.matmat`` (dispatch, 1/n, weight decay, layout) against numpy."""
    data = rmt.MultiIndexModel("z1z2", noise=0.1).sample(N_ROWS, 19, rng)
    net = rmt.TwoLayerNet(m, activation="tanh", loss="square")
    W = rng.standard_normal((data.d, m)) / np.sqrt(data.d)
    H = rmt.Hessian(net, data, W, weight_decay=weight_decay)
    V = rng.standard_normal((m * data.d, b))
    ref = np.empty_like(V)
    for c in range(b):
        Vc = V[:, c].reshape(m, data.d).T  # d x m, neuron-major columns
        R = np.einsum("ij,ijk->ik", data.X @ Vc, H.D)
        ref[:, c] = (data.X.T @ R / data.n + weight_decay * Vc).T.ravel()
    assert_close(H.matmat(V), ref)
    assert_close(H.matvec(V[:, 0]), ref[:, 0])


def test_generated_module_is_up_to_date():
    """``_generated/hvp_small.py`` has the syntax tree of what the generator writes now
    (formatting aside, so no ruff version can break it), and is the module that is imported."""
    committed = GENERATED / "hvp_small.py"
    assert pathlib.Path(sys.modules[KERNELS[1].py_func.__module__].__file__) == committed
    text = committed.read_text()
    assert text.startswith("# GENERATED by tools/gen_hvp_small.py")
    assert same_syntax(text, gen.module_source())
    assert not same_syntax(text, gen.module_source().replace("+= 8", "+= 4", 1))
    assert sorted(KERNELS) == sorted(gen.ROWS)
    assert gen.kernel_name(4, 2) == "hvp_m4_d2" and gen.kernel_name(4) == "hvp_m4"
    assert {m: k.__name__ for m, k in PIPELINED.items()} == {
        m: gen.pipelined_name(m) for m in gen.PIPE_ROWS
    }
