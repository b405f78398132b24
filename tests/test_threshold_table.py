"""``rmt.population_threshold`` and the threshold table: a solver failure is never reported as
an answer, and the fold search converges for phase retrieval with softplus/Huber at m = 3
(docs/theory.md sections 3, 6.6)."""

import numpy as np
import pytest

import rmt
import rmt.thresholds.population
from rmt.app.report import format_threshold_table
from rmt.experiments.config import RunConfig
from rmt.experiments.threshold_table import TABLE_COLUMNS, threshold_table
from rmt.freeprob.mp import ConvergenceError

MODEL = rmt.MultiIndexModel("phase_retrieval")
MESSAGE = "extended Newton failed at tau = 5.69 near the fold"


@pytest.fixture
def failing_bbp(monkeypatch):
    """``bbp_threshold`` raising the solver failure seen in the threshold table."""

    def fail(*args, **kwargs):
        raise ConvergenceError(MESSAGE)

    monkeypatch.setattr(rmt.thresholds.population, "bbp_threshold", fail)


def test_solver_failure_is_failed_with_nan(failing_bbp):
    net = rmt.TwoLayerNet(1, activation="softplus", loss="huber")
    res = rmt.population_threshold(MODEL, net)
    assert res.status == "failed"
    assert np.isnan(res.delta_pop) and not np.isinf(res.delta_pop)
    assert not res.converged
    assert MESSAGE in res.reason
    assert res.as_dict()["status"] == "failed"


def test_table_row_csv_and_terminal_show_failure(failing_bbp):
    rows = threshold_table(RunConfig(), variants=[dict(width=1)], progress=False)
    (row,) = rows
    assert "status" in TABLE_COLUMNS
    assert row["status"] == "failed" and np.isnan(row["delta_pop"]) and row["ratio"] is None
    assert MESSAGE in row["reason"]
    text = format_threshold_table(rows)
    line = text.splitlines()[2]
    assert "FAILED" in line and "inf" not in line and "nan" not in line.split()[1]


def test_found_threshold_has_status_found():
    net = rmt.TwoLayerNet(1, activation="softplus", loss="huber")
    res = rmt.population_threshold(MODEL, net)
    assert res.status == "found" and np.isfinite(res.delta_pop) and res.converged


M3_DELTA = 3.2472  # a grid point of the BBP search where the fold search failed


@pytest.fixture(scope="module")
def m3():
    net = rmt.TwoLayerNet(3, activation="softplus", loss="huber")
    spec = rmt.population_point(MODEL, net)
    return net, spec, rmt.SpikeLaw.from_network(MODEL, net, spec.Q, spec.M)


@pytest.mark.slow
@pytest.mark.ci
def test_m3_edge_converges_and_matches_dense_eigh(m3):
    """The left edge and the two Theta* outliers at ``M3_DELTA`` against dense ``eigh`` of the
    Hessian at the population point (d = 500, mean over 2 seeds; the finite-size spread of the
    first bulk eigenvalue is about 0.004 here, a bulk of width 0.29)."""
    net, spec, law = m3
    edges = rmt.bulk_edges(law, M3_DELTA)  # raised "extended Newton failed ... near the fold"
    assert edges.lo_kind == "fold" and edges.converged
    outs = sorted(o.value for o in rmt.outliers(law, M3_DELTA, side="left"))
    assert len(outs) == 2
    d, bottoms = 500, []
    for seed in range(2):
        rng = np.random.default_rng([seed, 14])
        data = MODEL.sample(int(round(M3_DELTA * d)), d, rng=rng)
        H = rmt.Hessian(net, data, spec.draw(d, data.theta, rng))
        bottoms.append(np.linalg.eigvalsh(H.to_dense())[:3])
    sim = np.mean(bottoms, axis=0)
    assert abs(sim[2] - edges.lo) < 0.006  # the first bulk eigenvalue: the edge
    assert np.max(np.abs(sim[:2] - outs)) < 0.006


@pytest.mark.slow
@pytest.mark.ci
def test_m3_threshold_is_finite_and_converged(m3):
    net, _, _ = m3
    res = rmt.population_threshold(MODEL, net)
    assert res.status == "found" and res.converged and not res.notes
    assert np.isfinite(res.delta_pop) and 0.5 < res.delta_pop < 2.0
