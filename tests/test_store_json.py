"""Result files (``rmt.experiments.store``): strict JSON that any parser reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rmt.experiments.store import finite_or_none, strict_json, write_json


def _strict_loads(text):
    """``json.loads`` that refuses NaN and Infinity, as strict parsers do."""

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_null(tmp_path):
    payload = {
        "delta": float("nan"),
        "bracket": (1.0, float("inf")),
        "values": np.array([0.5, -np.inf, np.nan]),
        "nested": {"x": np.float64("nan"), "n": np.int64(3), "ok": 2.5},
    }
    write_json(tmp_path / "a.json", payload)
    got = _strict_loads((tmp_path / "a.json").read_text())
    assert got == {
        "delta": None,
        "bracket": [1.0, None],
        "values": [0.5, None, None],
        "nested": {"x": None, "n": 3, "ok": 2.5},
    }
    assert _strict_loads(strict_json(payload)) == got
    assert finite_or_none([np.nan, 1]) == [None, 1]
    with pytest.raises(ValueError, match="non-standard"):
        _strict_loads(json.dumps({"a": float("nan")}))  # the parser does refuse them
