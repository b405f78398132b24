"""Configuration of a theory-against-simulation run, shared by the sweep and the CLI."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ._validation import check_choice, check_nonneg_float, check_positive_int
from .models import MultiIndexModel
from .network import TwoLayerNet

POINTS = ("population", "trained", "zero")
EIG_METHODS = ("lanczos", "block_lanczos", "arpack", "lobpcg", "dense")


def parse_deltas(spec) -> tuple[float, ...]:
    """Parse ``"2"``, ``"1,2,4"`` or a range ``"start:stop:num"`` (inclusive, like linspace).

    Sequences of numbers pass through.  Every value must be finite and positive.
    """
    if isinstance(spec, str):
        text = spec.strip()
        try:
            if ":" in text:
                parts = text.split(":")
                if len(parts) != 3:
                    raise ValueError
                values = np.linspace(float(parts[0]), float(parts[1]), int(parts[2]))
            else:
                values = [float(p) for p in text.split(",") if p.strip()]
        except ValueError:
            raise ValueError(
                f"--delta must be a number, a list '1,2,4' or a range 'start:stop:num'; got {spec!r}"
            ) from None
    else:
        values = np.atleast_1d(np.asarray(spec, dtype=float))
    values = tuple(float(v) for v in values)
    if not values or not all(np.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"delta values must be finite and > 0; got {spec!r}")
    return values


@dataclass(frozen=True)
class RunConfig:
    """One configuration of data model, network, point and sizes.

    ``deltas`` are sample ratios ``n/d``; ``seeds`` are explicit integer seeds, and the data at
    ``(delta, seed)`` are drawn from ``numpy.random.default_rng([seed, round(1e6 * delta)])``.
    """

    target: str = "phase_retrieval"
    k: int | None = None
    noise: float = 0.0
    width: int = 2
    activation: str = "softplus"
    loss: str = "huber"
    huber_delta: float = 1.0
    point: str = "population"
    d: int = 1000
    deltas: tuple = (1.0, 2.0, 4.0)
    seeds: tuple = (0,)
    n_eigs: int = 3
    method: str = "lanczos"
    weight_decay: float = 0.0
    train_steps: int = 2000
    lr: float = 0.5
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "deltas", parse_deltas(self.deltas))
        seeds = tuple(check_positive_int(s, "seed", minimum=0) for s in np.atleast_1d(self.seeds))
        if not seeds:
            raise ValueError("seeds must not be empty")
        object.__setattr__(self, "seeds", seeds)
        check_choice(self.point, "point", POINTS)
        check_choice(self.method, "method", EIG_METHODS)
        check_positive_int(self.d, "d")
        check_positive_int(self.n_eigs, "n_eigs")
        check_positive_int(self.train_steps, "train_steps")
        check_nonneg_float(self.weight_decay, "weight_decay")
        if not check_nonneg_float(self.lr, "lr") > 0:
            raise ValueError(f"lr must be > 0; got {self.lr}")
        self.model()  # validates target, k and noise
        self.net()  # validates width, activation, loss

    def model(self) -> MultiIndexModel:
        return MultiIndexModel(self.target, k=self.k, noise=self.noise)

    def net(self) -> TwoLayerNet:
        return TwoLayerNet(self.width, self.activation, self.loss, huber_delta=self.huber_delta)

    def n_of(self, delta: float) -> int:
        """Sample size ``n = round(delta * d)`` (at least 1)."""
        return max(1, int(round(delta * self.d)))

    def rng_for(self, delta: float, seed: int) -> np.random.Generator:
        return np.random.default_rng([int(seed), int(round(1e6 * delta))])

    def to_dict(self) -> dict:
        out = asdict(self)
        out["k"] = self.model().k
        return out
