"""Run configuration: delta grammar, seeds and validation."""

import dataclasses

import numpy as np
import pytest

from rmt.experiments.config import RunConfig, parse_deltas


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("2", (2.0,)),
        ("1,2,4", (1.0, 2.0, 4.0)),
        ("1:3:5", (1.0, 1.5, 2.0, 2.5, 3.0)),
        ([0.5, 1], (0.5, 1.0)),
        (3, (3.0,)),
    ],
)
def test_parse_deltas(spec, expected):
    assert parse_deltas(spec) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("spec", ["", "a,b", "1:2", "0", "-1,2", "1:2:x", "nan", [1, np.inf]])
def test_parse_deltas_rejects(spec):
    with pytest.raises(ValueError, match="delta"):
        parse_deltas(spec)


def test_config_validates_everything_up_front():
    with pytest.raises(ValueError, match="known: abs"):
        RunConfig(target="nope")
    with pytest.raises(ValueError, match="known: population, trained, zero"):
        RunConfig(point="saddle")
    with pytest.raises(ValueError, match="activation"):
        RunConfig(activation="gelu")
    with pytest.raises(ValueError, match="seed"):
        RunConfig(seeds=(-1,))
    with pytest.raises(ValueError, match="lr"):
        RunConfig(lr=0.0)


def test_config_sizes_and_seeded_streams():
    cfg = RunConfig(d=300, deltas="0.5,2", seeds=(0, 1))
    assert [cfg.n_of(x) for x in cfg.deltas] == [150, 600]
    a = cfg.rng_for(2.0, 1).standard_normal(3)
    b = cfg.rng_for(2.0, 1).standard_normal(3)
    c = cfg.rng_for(2.0, 0).standard_normal(3)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    assert cfg.to_dict()["k"] == 1


def test_methods_are_the_eigensolvers_and_messages_name_fields():
    from rmt.eigen import METHODS
    from rmt.experiments.config import EIG_METHODS

    assert EIG_METHODS == METHODS and "primme" in EIG_METHODS
    with pytest.raises(ValueError, match="^deltas must be"):
        RunConfig(deltas="1:2")
    with pytest.raises(ValueError, match="^max_delta must be > 0.05"):
        RunConfig(max_delta=0.05)
    with pytest.raises(TypeError, match="^table must be True or False"):
        RunConfig(table="yes")


def test_to_dict_for_a_command_keeps_only_what_changes_its_results():
    cfg = RunConfig(table=True, scheduler="local")
    sweep = cfg.to_dict("sweep")
    assert {"deltas", "seeds", "n_eigs", "method", "lr"} <= set(sweep)
    assert not {"table", "max_delta", "continue_steps", "scheduler"} & set(sweep)
    assert set(cfg.to_dict()) == {f.name for f in dataclasses.fields(RunConfig)}
