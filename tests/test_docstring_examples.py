"""The Examples sections of the docstrings run as doctests and print what they show.

Only the modules of the problem, operators, eigen, free-probability, thresholds, dynamics and
experiments layers listed below are collected; each docstring with examples is one test.
"""

import doctest
import importlib

import pytest

MODULES = (
    "rmt.problem.ensembles",
    "rmt.problem.models",
    "rmt.problem.network",
    "rmt.problem.quadrature",
    "rmt.operators.base",
    "rmt.operators.hessian",
    "rmt.operators.streaming",
    "rmt.operators.distributed",
    "rmt.eigen.density",
    "rmt.eigen.inputs",
    "rmt.eigen.lanczos",
    "rmt.eigen.overlaps",
    "rmt.eigen.result",
    "rmt.eigen.solvers",
    "rmt.freeprob.alg",
    "rmt.freeprob.bbp",
    "rmt.freeprob.closed_forms",
    "rmt.freeprob.edges",
    "rmt.freeprob.law",
    "rmt.freeprob.mp",
    "rmt.freeprob.nodes",
    "rmt.freeprob.outliers",
    "rmt.freeprob.plugin",
    "rmt.freeprob.scalar",
    "rmt.freeprob.spectrum",
    "rmt.freeprob.unbounded",
    "rmt.thresholds.points",
    "rmt.thresholds.population",
    "rmt.thresholds.statistics",
    "rmt.dynamics.descent",
    "rmt.dynamics.escape",
    "rmt.dynamics.dmft",
    "rmt.experiments.config",
    "rmt.experiments.grokking",
    "rmt.experiments.learning",
    "rmt.experiments.simulation",
    "rmt.experiments.spectra",
    "rmt.experiments.store",
    "rmt.experiments.sweep",
    "rmt.experiments.theory",
    "rmt.experiments.threshold_table",
    "rmt.experiments.training",
    "rmt.progress",
    "rmt.validation",
)


def _examples():
    """Every docstring with examples, once (the finder skips names imported from elsewhere)."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = {}
    for name in MODULES:
        for test in finder.find(importlib.import_module(name), name):
            if test.examples:
                found.setdefault(test.name, test)
    return [found[key] for key in sorted(found)]


EXAMPLES = _examples()


def test_the_public_api_has_examples():
    names = {test.name.rsplit(".", 1)[-1] for test in EXAMPLES}
    for public in (
        "extreme_eigs",
        "bulk_edges",
        "outliers",
        "population_point",
        "gradient_descent",
        "dmft_gd",
        "dmft_replicas",
        "theta_margin",
        "RunConfig",
        "parse_deltas",
        "simulate_point",
        "learn_point",
        "plugin_law",
        "cavity_self_term",
        "RowData",
        "StreamingHessian",
        "run_tasks",
        "plateau_run",
        "grokking",
    ):
        assert public in names


@pytest.mark.parametrize("test", EXAMPLES, ids=[test.name for test in EXAMPLES])
def test_docstring_example_prints_what_it_shows(test):
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=report.append)
    assert result.attempted > 0
    assert result.failed == 0, "".join(report)
