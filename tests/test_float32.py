"""float32 storage of ``X``, float64 arithmetic.

A float32 ``X`` must give, on every kernel path of the fused product (unrolled ``hvp_m1..4``,
pipelined ``hvp_m1_p4``, ``hvp_m2_p4``, generic ``hvp_fused``, explicit-SIMD ``simd_w1..3``, the
pipelined ``simd_w1_pipe``, the 4-lane ``simd4_c*`` and the panel kernels), in ``Hessian``, ``StreamingHessian`` and ``DistributedHessian``, the float64
operator of the rounded ``X`` (``X32.astype(float64)``) to float64 accuracy, against the numpy
reference product and dense ``eigh``; its extreme eigenvalues must be within ``1e-6 ||H||`` of
the float64 operator on the same draw; the float32 draw is the float64 draw rounded; and the products
accumulate in float64 (a float32 accumulation would be visibly less accurate).
"""

import functools

import numpy as np
import pytest

import rmt
from rmt.kernels._generated.hvp_small import KERNELS as SMALL
from rmt.kernels._generated.hvp_small import PIPELINED
from rmt.kernels.dispatch import default_target
from rmt.kernels.hessian import hvp_fused, hvp_kernel, preactivations
from rmt.kernels.simd import (
    panel4_c32,
    panel_w4,
    simd4_c4,
    simd4_c8,
    simd_w1,
    simd_w1_pipe,
    simd_w2,
    simd_w3,
)
from rmt.operators.streaming import StreamingHessian, read_rows

from .test_hvp_kernels import assert_close, numpy_product

N_ROWS = 109  # remainders after 16, 8, 6 and 4 rows per step
#: (kernel name, kernel, m, b): every path of ``hvp_kernel``'s dispatch
PATHS = [(f"hvp_m{m}", SMALL[m], m, 3) for m in (1, 2, 3, 4)]
PATHS += [(PIPELINED[m].__name__, PIPELINED[m], m, 1) for m in sorted(PIPELINED)]
PATHS += [("hvp_fused m=5", hvp_fused, 5, 2), ("hvp_fused m=6", hvp_fused, 6, 1)]
PATHS += [(k.__name__, k, 4, 2 * w) for w, k in ((1, simd_w1_pipe), (2, simd_w2), (3, simd_w3))]
PATHS += [(k.__name__, k, 4, 2) for k in (simd_w1,)]  # avx512, float32 blocks of 2
PATHS += [(k.__name__, k, 4, c // 4) for c, k in ((4, simd4_c4), (8, simd4_c8))]
PATHS += [
    (k.__name__, functools.partial(k, panel_bytes=1 << 20), 4, 8) for k in (panel_w4, panel4_c32)
]
WIDE_VECTORS = default_target() == "avx512"


def _rounded_problem(m, b, rng, n=N_ROWS, d=29):
    X32 = rng.standard_normal((n, d)).astype(np.float32)
    A = rng.standard_normal((n, m, m))
    return X32, A + A.transpose(0, 2, 1), rng.standard_normal((b * m, d))


def _skip_simd_without_wide_vectors(name):
    if name.startswith("simd_w") and not WIDE_VECTORS:
        pytest.skip(f"no AVX-512 on this CPU: {name} is not dispatched here (float64 tests run it)")


#: the paths a solver on m = 4 takes for float32 rows on this CPU (the single product and the
#: block of 2 of block Lanczos, as ``hvp_kernel`` dispatches them: ``hvp_m4`` and ``simd4_c8``
#: on avx2, ``hvp_m4_p4`` and ``simd_w1`` on avx512) run in CI; each float32 specialisation
#: compiles for 15-90 s on a fresh clone, so the others are `slow` (make test-all)
CI_PATHS = {hvp_kernel(4, c, dtype=np.float32).__name__ for c in (4, 8)}
PATH_PARAMS = [
    pytest.param(*p, id=p[0], marks=() if p[0] in CI_PATHS else pytest.mark.slow) for p in PATHS
]


@pytest.mark.parametrize("name, kernel, m, b", PATH_PARAMS)
def test_every_kernel_path_reads_float32_as_its_float64_rounding(name, kernel, m, b, rng):
    _skip_simd_without_wide_vectors(name)
    X32, D, Vt = _rounded_problem(m, b, rng)
    X64 = X32.astype(np.float64)
    got = kernel(X32, D, Vt, 3)
    assert got.dtype == np.float64
    assert_close(got, numpy_product(X64, D, Vt))
    assert_close(got, kernel(X64, D, Vt, 3))


def test_preactivations_accumulate_in_float64(rng):
    """``U = X W`` of a float32 ``X``: the float64 product of the rounded rows, not float32's."""
    X32 = (1.0 + 1e-3 * rng.standard_normal((40, 3000))).astype(np.float32)
    W = rng.standard_normal((3000, 3))
    ref = X32.astype(np.float64) @ W
    np.testing.assert_allclose(preactivations(X32, W), ref, rtol=1e-12, atol=1e-12 * abs(ref).max())
    # float32 accumulation would be off by about 1e-4 relative here
    assert np.abs((X32 @ W.astype(np.float32)) - ref).max() > 1e-9 * abs(ref).max()


# -- Dataset and sampling ---------------------------------------------------------------------


def test_sample_float32_is_the_float64_draw_rounded():
    model = rmt.MultiIndexModel("phase_retrieval", noise=0.1)
    d64 = model.sample(300, 40, rng=5)
    d32 = model.sample(300, 40, rng=5, dtype=np.float32)
    assert d32.X.dtype == np.float32 and d32.y.dtype == np.float64
    np.testing.assert_array_equal(d32.X, d64.X.astype(np.float32))
    np.testing.assert_array_equal(d32.theta, d64.theta)
    np.testing.assert_allclose(d32.y, d64.y, rtol=1e-12, atol=1e-12)
    assert model.sample(300, 40, rng=5).X.dtype == np.float64  # the default stays float64


def test_sample_float32_in_row_blocks_is_the_same_stream(monkeypatch):
    """Blocks of a few rows (the big-``n`` path) give the same draw as one block."""
    from rmt.problem import models

    model = rmt.MultiIndexModel("z1z2")
    whole = model.sample(50, 7, rng=1, dtype=np.float32)
    real = models._draw_float32
    monkeypatch.setattr(models, "_draw_float32", lambda *a: real(*a, block_bytes=3 * 8 * 7))
    blocks = model.sample(50, 7, rng=1, dtype=np.float32)
    np.testing.assert_array_equal(blocks.X, whole.X)
    np.testing.assert_allclose(blocks.y, whole.y, rtol=1e-13, atol=1e-13)


def test_dataset_keeps_float32_without_a_copy_and_converts_the_rest(rng):
    X32 = rng.standard_normal((20, 4)).astype(np.float32)
    data = rmt.Dataset(X32, np.ones(20))
    assert data.X.dtype == np.float32 and np.shares_memory(data.X, X32)
    assert rmt.Dataset(X32.astype(np.float16), np.ones(20)).X.dtype == np.float64
    assert rmt.Dataset(np.ones((20, 4), dtype=int), np.ones(20)).X.dtype == np.float64
    fortran = rmt.Dataset(np.asfortranarray(X32), np.ones(20)).X
    assert fortran.dtype == np.float32 and fortran.flags.c_contiguous


def test_bad_float32_input():
    X = np.ones((6, 3), dtype=np.float32)
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="finite; it has 1 NaN"):
        rmt.Dataset(X, np.ones(6))
    with pytest.raises(ValueError, match="2-dimensional"):
        rmt.Dataset(np.ones(6, dtype=np.float32), np.ones(6))
    with pytest.raises(ValueError, match="dtype must be np.float64 or np.float32"):
        rmt.MultiIndexModel("z1z2").sample(10, 3, rng=0, dtype=np.int32)


# -- operators --------------------------------------------------------------------------------


def _pair(rng, m=4, n=400, d=24, act="softplus", loss="huber"):
    """The float32 and the float64 operator of the same rounded draw, and the plain draw."""
    model = rmt.MultiIndexModel("phase_retrieval")
    data64 = model.sample(n, d, rng=11)
    data32 = model.sample(n, d, rng=11, dtype=np.float32)
    rounded = rmt.Dataset(data32.X.astype(np.float64), data32.y, data32.theta)
    net = rmt.TwoLayerNet(m, activation=act, loss=loss)
    W = rng.standard_normal((d, m)) / np.sqrt(d)
    return net, W, data32, rounded, data64


@pytest.mark.parametrize("m", [1, 2, 4, 5])
def test_hessian_float32_is_the_float64_operator_of_the_rounded_x(m, rng):
    net, W, data32, rounded, _ = _pair(rng, m=m)
    H32 = rmt.Hessian(net, data32, W, weight_decay=0.01)
    H64 = rmt.Hessian(net, rounded, W, weight_decay=0.01)
    assert H32.data.X.dtype == np.float32 and np.shares_memory(H32.data.X, data32.X)
    np.testing.assert_allclose(H32.D, H64.D, rtol=1e-12, atol=1e-14)
    dense = H64.to_dense()
    np.testing.assert_allclose(H32.to_dense(), dense, rtol=0, atol=1e-13 * abs(dense).max())
    for b in (1, 2, 8):  # one vector, blocks of 2 and 8: every dispatched kind of kernel
        V = rng.standard_normal((H32.shape[0], b))
        ref = dense @ V
        np.testing.assert_allclose(H32.matmat(V), ref, rtol=0, atol=1e-12 * abs(ref).max())


def test_eigenvalues_float32_within_1e6_norm_of_float64_same_draw(rng):
    net, W, data32, _, data64 = _pair(rng, m=2, n=1200, d=60)
    H32 = rmt.Hessian(net, data32, W)
    dense64 = rmt.Hessian(net, data64, W).to_dense()
    ref = np.linalg.eigh(dense64)[0]
    norm = np.abs(ref).max()
    for which, sl in (("smallest", slice(0, 4)), ("largest", slice(-4, None))):
        res = rmt.extreme_eigs(H32, k=4, which=which, method="block_lanczos", tol=1e-10)
        got = np.sort(res.values)
        np.testing.assert_allclose(got, ref[sl], rtol=0, atol=1e-6 * norm)
    # the rounding is visible (the test could fail): float32 and float64 operators differ
    assert np.abs(H32.to_dense() - dense64).max() > 1e-12 * norm


@pytest.mark.slow  # about 60 s of float32 compilation on a fresh clone
def test_streaming_float32_memmap_reads_float32_blocks(rng, tmp_path):
    net, W, data32, rounded, _ = _pair(rng, m=4, n=301)
    path = tmp_path / "X32.npy"
    np.save(path, data32.X)
    rows = rmt.RowData(str(path), data32.y)
    blk = read_rows(rows.X, 10, 50)
    assert blk.dtype == np.float32 and np.shares_memory(blk, rows.X)
    S = StreamingHessian(net, rows, W, weight_decay=0.01, block_rows=37)
    dense = rmt.Hessian(net, rounded, W, weight_decay=0.01).to_dense()
    np.testing.assert_allclose(S.to_dense(), dense, rtol=0, atol=1e-13 * abs(dense).max())
    for b in (1, 2, 8):
        V = rng.standard_normal((S.shape[0], b))
        ref = dense @ V
        np.testing.assert_allclose(S.matmat(V), ref, rtol=0, atol=1e-12 * abs(ref).max())


def test_distributed_float32_shards(rng):
    distributed = pytest.importorskip("distributed")
    from rmt.operators.distributed import DistributedHessian

    net, W, data32, rounded, _ = _pair(rng, m=3, n=201, d=17)
    dense = rmt.Hessian(net, rounded, W).to_dense()
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
        DistributedHessian(net, data32, W, client=client) as H,
    ):
        shard_dtypes = client.gather([client.submit(lambda s: s.X.dtype, s) for s in H.shards])
        V = rng.standard_normal((H.shape[0], 2))
        got = H.matmat(V)
    assert all(dt == np.float32 for dt in shard_dtypes)
    ref = dense @ V
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * abs(ref).max())


def test_gradient_descent_on_float32_data(rng):
    """GD on a float32 ``Dataset`` follows GD on the rounded float64 ``X`` (not a wrong answer)."""
    net, _, data32, rounded, _ = _pair(rng, m=2, n=500, d=20)
    kw = dict(lr=0.5, steps=60, init_scale=0.1, rng=3)
    run32 = rmt.gradient_descent(net, data32, **kw)
    run64 = rmt.gradient_descent(net, rounded, **kw)
    np.testing.assert_allclose(run32.W_final, run64.W_final, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(run32.loss, run64.loss, rtol=1e-10)
