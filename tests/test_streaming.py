"""StreamingHessian against the in-memory rmt.Hessian and the dense reference."""

import numpy as np
import pytest

import rmt
from rmt.operators.streaming import RowData, StreamingHessian, default_block_rows

from .conftest import assert_operator_matches_dense

N, D_DIM, M = 203, 17, 3


def _problem(rng, activation="tanh", loss="square"):
    data = rmt.MultiIndexModel("phase_retrieval").sample(N, D_DIM, rng)
    net = rmt.TwoLayerNet(M, activation, loss)
    W = rng.standard_normal((D_DIM, M)) / np.sqrt(D_DIM)
    return data, net, W


def _rel_err(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _sources(tmp_path, X):
    """X as: memmap object, path to .npy, Fortran-ordered .npy, float32 in memory."""
    path = tmp_path / "X.npy"
    np.save(path, X)
    fpath = tmp_path / "XF.npy"
    np.save(fpath, np.asfortranarray(X))
    return {
        "memmap": np.load(path, mmap_mode="r"),
        "path": str(path),
        "fortran_npy": fpath,
        "ndarray": X,
    }


@pytest.mark.parametrize("source", ["memmap", "path", "fortran_npy", "ndarray"])
@pytest.mark.parametrize("block_rows", [1, 50, 64, N, 10_000])
def test_product_matches_in_memory(tmp_path, rng, source, block_rows):
    data, net, W = _problem(rng)
    X = _sources(tmp_path, data.X)[source]
    Hs = StreamingHessian(net, RowData(X, data.y), W, weight_decay=0.3, block_rows=block_rows)
    H = rmt.Hessian(net, data, W, weight_decay=0.3)
    np.testing.assert_allclose(Hs.D, H.D, rtol=1e-13, atol=1e-14)
    V = rng.standard_normal((M * D_DIM, 4))
    assert _rel_err(Hs.matmat(V), H.matmat(V)) <= 1e-12
    assert _rel_err(Hs.matvec(V[:, 0]), H.matvec(V[:, 0])) <= 1e-12
    assert (Hs.n_matvec, Hs.n_passes) == (5, 2)


def test_against_dense_reference_from_both_sides(tmp_path, rng):
    data, net, W = _problem(rng, activation="cubic", loss="huber")
    path = tmp_path / "X.npy"
    np.save(path, data.X)
    Hs = StreamingHessian(net, RowData(path, data.y), W, weight_decay=0.1, block_rows=37)
    dense = rmt.Hessian(net, data, W, weight_decay=0.1).to_dense()
    assert_operator_matches_dense(Hs, dense, rng, rtol=1e-12)
    np.testing.assert_allclose(Hs.to_dense(), dense, rtol=0, atol=1e-12 * np.abs(dense).max())


def test_float32_source_is_promoted_like_in_memory(tmp_path, rng):
    data, net, W = _problem(rng)
    X32 = data.X.astype(np.float32)
    path = tmp_path / "X32.npy"
    np.save(path, X32)
    Hs = StreamingHessian(net, RowData(path, data.y), W, block_rows=40)
    H = rmt.Hessian(net, rmt.Dataset(X32.astype(np.float64), data.y), W)
    V = rng.standard_normal((M * D_DIM, 2))
    assert _rel_err(Hs.matmat(V), H.matmat(V)) <= 1e-12


def test_zarr_source(tmp_path, rng):
    zarr = pytest.importorskip("zarr")
    data, net, W = _problem(rng)
    Z = zarr.open_array(
        str(tmp_path / "X.zarr"), mode="w", shape=data.X.shape, chunks=(30, D_DIM), dtype="f8"
    )
    Z[:] = data.X
    assert default_block_rows(Z) % 30 == 0 or default_block_rows(Z) == N
    Hs = StreamingHessian(net, RowData(Z, data.y), W, weight_decay=0.2, block_rows=60)
    H = rmt.Hessian(net, data, W, weight_decay=0.2)
    V = rng.standard_normal((M * D_DIM, 3))
    assert _rel_err(Hs.matmat(V), H.matmat(V)) <= 1e-12


@pytest.mark.parametrize("form", ["dataset", "namespace_path", "rowdata_memmap"])
def test_same_arguments_as_hessian(tmp_path, rng, form):
    """``StreamingHessian(net, data, W, weight_decay)`` for a Dataset, any object with ``X`` and
    ``y`` (here ``X`` a path) and a RowData, against ``Hessian.to_dense()``."""
    from types import SimpleNamespace

    data, net, W = _problem(rng, activation="softplus", loss="huber")
    np.save(tmp_path / "X.npy", data.X)
    given = {
        "dataset": data,
        "namespace_path": SimpleNamespace(X=tmp_path / "X.npy", y=list(data.y)),
        "rowdata_memmap": RowData(np.load(tmp_path / "X.npy", mmap_mode="r"), data.y),
    }[form]
    dense = rmt.Hessian(net, data, W, 0.2).to_dense()
    Hs = StreamingHessian(net, given, W, 0.2, block_rows=45)
    assert isinstance(Hs.data, RowData) and Hs.data.n == N and Hs.data.d == D_DIM
    assert Hs.data.path == (str(tmp_path / "X.npy") if form == "namespace_path" else None)
    assert_operator_matches_dense(Hs, dense, rng, rtol=1e-12)
    np.testing.assert_allclose(Hs.to_dense(), dense, rtol=0, atol=1e-12 * np.abs(dense).max())


def test_to_dense_beyond_the_memory_limit_streams_products(monkeypatch, rng):
    """Above ``DENSE_MAX_BYTES`` ``to_dense`` does not load ``X``: it multiplies the identity
    (``m d`` vectors, in blocks) and still equals the reference assembly."""
    import rmt.operators.streaming

    data, net, W = _problem(rng)
    Hs = StreamingHessian(net, data, W, 0.1, block_rows=50)
    reference = Hs.to_dense()
    assert Hs.n_matvec == 0
    monkeypatch.setattr(rmt.operators.streaming, "DENSE_MAX_BYTES", 0)
    streamed = Hs.to_dense()
    assert Hs.n_matvec == M * D_DIM and Hs.n_passes == -(-M * D_DIM // 32)
    np.testing.assert_allclose(streamed, reference, rtol=0, atol=1e-13 * np.abs(reference).max())


def test_eigsh_on_streaming_operator(tmp_path, rng):
    from scipy.sparse.linalg import eigsh

    data, net, W = _problem(rng)
    np.save(tmp_path / "X.npy", data.X)
    Hs = StreamingHessian(net, RowData(tmp_path / "X.npy", data.y), W, block_rows=70)
    dense = rmt.Hessian(net, data, W).to_dense()
    expected = np.linalg.eigvalsh(dense)[:3]
    vals = eigsh(Hs, k=3, which="SA", ncv=20, tol=1e-12, return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(vals), expected, atol=1e-10)
    before = Hs.n_matvec
    res = rmt.extreme_eigs(Hs, k=3, which="smallest", method="block_lanczos", tol=1e-10, rng=2)
    np.testing.assert_allclose(res.values, expected, atol=1e-8)
    assert Hs.n_matvec - before == res.n_matvec  # no symmetry probe: the operator declares it


def test_bad_input_messages(tmp_path, rng):
    data, net, W = _problem(rng)
    with pytest.raises(ValueError, match=r"\.npy"):
        StreamingHessian(net, RowData(str(tmp_path / "X.csv"), data.y), W)
    with pytest.raises(TypeError, match="row slicing"):
        StreamingHessian(net, RowData(3.0, data.y), W)
    with pytest.raises(ValueError, match="one label per row"):
        StreamingHessian(net, RowData(data.X, data.y[:-1]), W)
    with pytest.raises(ValueError, match="block_rows"):
        StreamingHessian(net, data, W, block_rows=0)
    X = data.X.copy()
    X[150, 2] = np.nan
    with pytest.raises(ValueError, match="rows 100:150|rows 150:200"):
        StreamingHessian(net, RowData(X, data.y), W, block_rows=50)
    with pytest.raises(TypeError, match="X and y"):
        StreamingHessian(net, (data.X, data.y), W)
    with pytest.raises(TypeError, match="positional"):
        StreamingHessian(net, data, W, 0.1, 50)  # block_rows is keyword-only
    Hs = StreamingHessian(net, data, W)
    with pytest.raises(ValueError, match=rf"V must have shape \({M * D_DIM}, b\)"):
        Hs.matmat(np.ones((M * D_DIM + 1, 2)))


def test_scale_out_without_dask_says_how_to_install(monkeypatch):
    """Runs without dask too: a missing dask.distributed names the [dist] extra."""
    import sys

    from rmt.operators.distributed import run_tasks

    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    assert run_tasks(divmod, [(7, 2), (9, 4)]) == [(3, 1), (2, 1)]  # serial needs no dask
    with pytest.raises(ImportError, match=r'pip install "rmt\[dist\]"'):
        run_tasks(divmod, [(7, 2)], scheduler="local")
