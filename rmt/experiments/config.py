"""Configuration of a run: the one carrier of every option of the ``rmt`` commands.

Each field of :class:`RunConfig` has metadata (see :func:`option`): its help text, the commands
that use it and its group; :mod:`rmt.app.cli` derives its flags and their defaults from them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from rmt.eigen import METHODS as EIG_METHODS
from rmt.problem.models import MultiIndexModel
from rmt.problem.network import TwoLayerNet
from rmt.thresholds.points import config_point_kinds
from rmt.validation import (
    check_choice,
    check_nonneg_float,
    check_positive_float,
    check_positive_int,
)

#: the commands that take a RunConfig
RUN_COMMANDS = ("spectrum", "sweep", "threshold", "train", "learn", "phase-diagram", "grokking")
#: the commands that work at a dimension ``d`` and sample ratios ``delta`` (all but the phase
#: diagram, which is asymptotic)
SIZED = ("spectrum", "sweep", "threshold", "train", "learn", "grokking")
#: the commands that sample data (threshold does with --point trained); all but grokking build
#: a Hessian
SIMULATING = ("spectrum", "sweep", "train", "learn", "threshold", "grokking")
#: smallest delta of the delta_NN search
MIN_DELTA = 0.05


def option(default, help, commands=RUN_COMMANDS, group="configuration", **cli):
    """A RunConfig field with its command-line metadata.

    ``cli`` may hold ``flag`` (default ``--name-with-dashes``), ``cli_type`` (default: the type
    of ``default``), ``to_field`` (turns the parsed value into the field's value), ``shown``
    (the default as the help shows it) and ``results=False`` for an option that cannot change a
    result (a sweep resumes across it).
    """
    meta = {"help": help, "commands": tuple(commands), "group": group, **cli}
    return field(default=default, metadata=meta)


def seed_range(count) -> tuple[int, ...]:
    """Seeds ``0..count-1`` (what a count of seeds means).

    Parameters
    ----------
    count : int
        The number of seeds, at least 1.

    Returns
    -------
    tuple of int

    Raises
    ------
    TypeError, ValueError
        Unless ``count`` is a positive int.
    """
    count = check_positive_int(count, "seeds")
    return tuple(range(count))


def parse_sizes(spec) -> tuple[int, ...]:
    """Parse ``"500,1000"`` (or a sequence) into a tuple of dimensions, each at least 2.

    Parameters
    ----------
    spec : str or sequence of int

    Returns
    -------
    tuple of int

    Raises
    ------
    TypeError, ValueError
        For text that is not a list of integers, or a dimension below 2.
    """
    if isinstance(spec, str):
        try:
            spec = [int(p) for p in spec.split(",") if p.strip()]
        except ValueError:
            raise ValueError(f"sizes must be a list of integers '500,1000'; got {spec!r}") from None
    return tuple(check_positive_int(v, "sizes", minimum=2) for v in spec)


def parse_deltas(spec) -> tuple[float, ...]:
    """Parse ``"2"``, ``"1,2,4"`` or a range ``"start:stop:num"`` (inclusive, like linspace).

    Parameters
    ----------
    spec : str, float or sequence of float
        A number, a comma-separated list, a range ``"start:stop:num"`` (``num`` values from
        ``start`` to ``stop``, both included), or numbers, which pass through.

    Returns
    -------
    tuple of float
        The sample ratios ``delta``.

    Raises
    ------
    ValueError
        For text of another form, ``num < 1``, or a value that is not finite and positive.

    Examples
    --------
    >>> import numpy as np
    >>> from rmt import parse_deltas
    >>> parse_deltas("1,2,4"), parse_deltas(2)
    ((1.0, 2.0, 4.0), (2.0,))
    >>> parse_deltas("1:3:5") == tuple(np.linspace(1, 3, 5))
    True
    """
    if isinstance(spec, str):
        text = spec.strip()
        try:
            if ":" in text:
                parts = text.split(":")
                if len(parts) != 3:
                    raise ValueError
                num = int(parts[2])
                if num < 1:
                    raise ValueError(
                        f"deltas range 'start:stop:num' gives num values from start to stop "
                        f"inclusive: num must be >= 1; got {spec!r}"
                    )
                values = np.linspace(float(parts[0]), float(parts[1]), num)
            else:
                values = [float(p) for p in text.split(",") if p.strip()]
        except ValueError as exc:
            if "num must be" in str(exc):
                raise
            raise ValueError(
                f"deltas must be a number, a list '1,2,4' or a range 'start:stop:num'; got {spec!r}"
            ) from None
    else:
        values = np.atleast_1d(np.asarray(spec, dtype=float))
    values = tuple(float(v) for v in values)
    if not values or not all(np.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"deltas must be finite and > 0; got {spec!r}")
    return values


def parse_stop_after_escape(spec) -> int | None:
    """Parse ``"5"`` or ``"none"`` (also an int or ``None``): the steps a run goes on after its
    escape, or ``None`` for the whole step budget.

    Parameters
    ----------
    spec : str, int or None

    Returns
    -------
    int or None

    Raises
    ------
    TypeError, ValueError
        For text that is neither ``"none"`` nor an integer, or an integer below 0.

    Examples
    --------
    >>> parse_stop_after_escape("5"), parse_stop_after_escape("none")
    (5, None)
    """
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none"):
        return None
    if isinstance(spec, str):
        try:
            spec = int(spec)
        except ValueError:
            raise ValueError(
                f"stop_after_escape must be an integer >= 0 or 'none'; got {spec!r}"
            ) from None
    return check_positive_int(spec, "stop_after_escape", minimum=0)


def parse_mark(spec) -> tuple[float, ...]:
    """Parse a threshold to mark on a figure: ``"2.63"`` or ``"2.63,0.02"`` (value and standard
    error), a number, a pair, or nothing (``None``, ``""``, ``()``).

    Parameters
    ----------
    spec : str, float, sequence of float or None

    Returns
    -------
    tuple of float
        ``()``, ``(value,)`` or ``(value, stderr)``.

    Raises
    ------
    ValueError
        For more than two numbers, text that is not numbers, a value that is not finite and
        > 0, or a standard error that is not finite and >= 0.

    Examples
    --------
    >>> parse_mark("2.63,0.02"), parse_mark(2.6), parse_mark(None)
    ((2.63, 0.02), (2.6,), ())
    """
    if spec is None:
        return ()
    given, form = spec, "delta_nn_mark must be 'value' or 'value,stderr'"
    if isinstance(spec, str):
        try:
            spec = [float(p) for p in spec.split(",") if p.strip()]
        except ValueError:
            raise ValueError(f"{form}; got {given!r}") from None
    values = tuple(float(v) for v in np.atleast_1d(np.asarray(spec, dtype=float)))
    if len(values) > 2:
        raise ValueError(f"{form}; got {given!r}")
    if values:
        check_positive_float(values[0], "delta_nn_mark")
    if len(values) == 2:
        check_nonneg_float(values[1], "delta_nn_mark's standard error")
    return values


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One configuration of data model, network, point, sizes and run options.

    ``deltas`` are sample ratios ``n/d`` (anything :func:`parse_deltas` reads); ``seeds`` are
    explicit integer seeds, and the data at ``(delta, seed)`` are drawn from
    ``numpy.random.default_rng([seed, round(1e6 * delta)])``.  Each field's help text is its
    metadata (:func:`option`); every field is checked when the configuration is made.

    Raises
    ------
    TypeError, ValueError
        For a field out of its range or choices (an unknown target, activation, loss, point
        or eigensolver, say).

    Examples
    --------
    >>> import numpy as np
    >>> import rmt
    >>> cfg = rmt.RunConfig(d=100, deltas="2:4:3", width=3)
    >>> cfg.deltas, cfg.n_of(2.5), cfg.net().width, cfg.model().k
    ((2.0, 3.0, 4.0), 250, 3, 1)
    >>> a = cfg.rng_for(3.0, 0).standard_normal(2)
    >>> bool(np.all(a == np.random.default_rng([0, 3_000_000]).standard_normal(2)))
    True
    """

    target: str = option("phase_retrieval", "registry target", group="data and network")
    k: int | None = option(
        None,
        "number of hidden directions",
        group="data and network",
        cli_type=int,
        shown="the target's",
    )
    noise: float = option(0.0, "label noise standard deviation", group="data and network")
    width: int = option(2, "hidden width m", group="data and network")
    activation: str = option("softplus", "activation", group="data and network")
    loss: str = option("huber", "loss", group="data and network")
    huber_delta: float = option(1.0, "Huber threshold", group="data and network")
    point: str = option(
        "population",
        "post-first-phase point",
        ("spectrum", "sweep", "threshold", "train"),
        group="point",
    )
    d: int = option(1000, "dimension", SIZED, group="sizes")
    deltas: tuple = option(
        (2.0,),
        "n/d: a value, a list '1,2,4' or a range 'start:stop:num' (num values from start to "
        "stop, both included, as numpy.linspace)",
        SIZED,
        group="sizes",
        flag="--delta",
        cli_type=str,
        shown="2",
    )
    seeds: tuple = option(
        (0,), "run seeds 0..N-1", group="sizes", cli_type=int, to_field=seed_range, shown="1"
    )
    n_eigs: int = option(3, "smallest eigenpairs per point", ("sweep",), "solver")
    method: str = option(
        "lanczos",
        "eigensolver: " + " | ".join(EIG_METHODS),
        ("sweep", "train", "learn", "threshold"),
        "solver",
    )
    weight_decay: float = option(
        0.0, "weight decay lambda_wd", (*SIMULATING, "phase-diagram"), "training"
    )
    train_steps: int = option(
        3000,
        "maximum first-phase steps (trained point); the step budget of each run (grokking)",
        SIMULATING,
        "training",
        flag="--steps",
    )
    lr: float = option(
        0.5, "learning rate (trained point, DMFT)", (*SIMULATING, "phase-diagram"), "training"
    )
    init_scale: float = option(
        1e-2,
        "norm of each neuron at the random start (trained point, DMFT)",
        (*SIMULATING, "phase-diagram"),
        "training",
    )
    continue_steps: int = option(3000, "steps after the plateau", ("train",), "training")
    stop_after_escape: int | None = option(
        5,
        "end each run this many steps after its escape ('none': run the whole --steps budget)",
        ("grokking",),
        "training",
        cli_type=str,
        to_field=parse_stop_after_escape,
    )
    sizes: tuple = option(
        (),
        "more dimensions d for the finite-size trend, e.g. '500,2000' (learn, grokking; "
        "threshold with --point trained)",
        ("learn", "threshold", "grokking"),
        "sizes",
        cli_type=str,
        to_field=parse_sizes,
        shown="none",
    )
    max_delta: float = option(
        64.0, "search the thresholds up to this delta", ("threshold", "phase-diagram"), "search"
    )
    table: bool = option(
        False,
        "also tabulate the thresholds over activations, losses and widths (with --point trained: "
        "delta_NN and delta_GD by simulation over a fixed list of targets, activations and widths)",
        ("threshold",),
        "search",
    )
    dmft: bool = option(
        False,
        "draw the DMFT of the first phase (d -> inf, no simulation; docs/theory.md 8.9): its "
        "curves and its Hessian at t1",
        ("learn",),
        "search",
    )
    no_dmft: bool = option(
        False,
        "skip the asymptotic delta_NN of the DMFT (d -> inf; about a minute): print only the "
        "population and spectral thresholds, or the simulated ones with --point trained",
        ("threshold",),
        "search",
    )
    dmft_steps: int = option(
        300,
        "first step budget of a DMFT solve; it doubles (to 4x) until the plateau is confirmed",
        ("threshold", "learn", "phase-diagram", "grokking"),
        "search",
    )
    dmft_samples: int = option(
        2500,
        "Monte Carlo draws of the DMFT per-sample process (per replica)",
        ("threshold", "learn", "phase-diagram", "grokking"),
        "search",
    )
    lifetime_steps: int = option(
        0,
        "steps of the DMFT past its plateau to follow the Theta* outlier until it merges with "
        "the bulk edge; its growth G against (1/2) log(m d) says whether the escape comes "
        "before the merge (docs/theory.md 7.7); 0: not computed",
        ("grokking",),
        "search",
    )
    row_steps: int = option(
        0,
        "steps of the DMFT with the Theta* row of a finite-d run: its median and quartiles "
        "over runs of the plateau length at each d, drift after the plateau included "
        "(docs/theory.md 7.8; an even target with k = 1); 0: not computed",
        ("grokking",),
        "search",
    )
    dmft_replicas: int = option(
        8,
        "independent DMFT replicas per delta: the Monte Carlo error of delta_NN",
        ("threshold", "phase-diagram"),
        "search",
    )
    dmft_d: int = option(
        0,
        "input dimension of a finite network for the DMFT delta_NN: each Hessian law from "
        "the n = delta d samples of that network (where rare samples set the Hessian's edge, "
        "as with the square loss, the threshold moves with d; docs/theory.md 8.10); 0: the "
        "limit d -> inf",
        ("threshold", "phase-diagram"),
        "search",
    )
    scheduler: str | None = option(
        None,
        "None (serial), 'local', or a Dask scheduler address",
        ("sweep", "learn", "phase-diagram", "grokking"),
        "solver",
        cli_type=str,
        results=False,
    )
    grid: str = option(
        "",
        "the axes of the phase diagram, 'name=v1,v2;name=...' over width, activation, loss, "
        "init_scale, lr, weight_decay, target",
        ("phase-diagram",),
        "search",
        shown="width=1,2,3,4;activation=softplus,tanh,relu;loss=huber,square",
        results=False,
    )
    delta_nn_mark: tuple = option(
        (),
        "delta_NN to mark on the plateau-length figure: 'value' or 'value,stderr' (a band of "
        "two standard errors)",
        ("grokking",),
        "figures",
        flag="--delta-nn",
        cli_type=str,
        to_field=parse_mark,
        shown="none",
        results=False,
    )

    def __post_init__(self):
        object.__setattr__(self, "deltas", parse_deltas(self.deltas))
        object.__setattr__(self, "sizes", parse_sizes(self.sizes))
        object.__setattr__(self, "delta_nn_mark", parse_mark(self.delta_nn_mark))
        seeds = tuple(check_positive_int(s, "seed", minimum=0) for s in np.atleast_1d(self.seeds))
        if not seeds:
            raise ValueError("seeds must not be empty")
        object.__setattr__(self, "seeds", seeds)
        check_choice(self.point, "point", config_point_kinds())
        check_choice(self.method, "method", EIG_METHODS)
        check_positive_int(self.d, "d")
        check_positive_int(self.n_eigs, "n_eigs")
        self._check_run_options()
        self.model()  # validates target, k and noise
        self.net()  # validates width, activation, loss

    def _check_run_options(self):
        check_positive_int(self.train_steps, "train_steps")
        check_positive_int(self.continue_steps, "continue_steps", minimum=0)
        if self.stop_after_escape is not None:
            check_positive_int(self.stop_after_escape, "stop_after_escape", minimum=0)
        check_nonneg_float(self.weight_decay, "weight_decay")
        check_nonneg_float(self.init_scale, "init_scale")
        check_positive_float(self.lr, "lr")
        check_positive_int(self.dmft_steps, "dmft_steps", minimum=2)
        check_positive_int(self.dmft_samples, "dmft_samples", minimum=2)
        check_positive_int(self.dmft_replicas, "dmft_replicas", minimum=2)
        check_positive_int(self.dmft_d, "dmft_d", minimum=2 if self.dmft_d else 0)
        check_positive_int(self.lifetime_steps, "lifetime_steps", minimum=0)
        check_positive_int(self.row_steps, "row_steps", minimum=0)
        if not check_positive_float(self.max_delta, "max_delta") > MIN_DELTA:
            raise ValueError(f"max_delta must be > {MIN_DELTA}; got {self.max_delta}")
        if not isinstance(self.table, (bool, np.bool_)):
            raise TypeError(f"table must be True or False; got {self.table!r}")
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise TypeError(f"scheduler must be None or a string; got {self.scheduler!r}")

    def model(self) -> MultiIndexModel:
        """The data model of ``target``, ``k`` and ``noise``."""
        return MultiIndexModel(self.target, k=self.k, noise=self.noise)

    def net(self) -> TwoLayerNet:
        """The network of ``width``, ``activation``, ``loss`` and ``huber_delta``."""
        return TwoLayerNet(self.width, self.activation, self.loss, huber_delta=self.huber_delta)

    def dmft_options(self) -> dict:
        """The settings of a DMFT solve that this configuration gives (:func:`rmt.dmft_margin`,
        :func:`rmt.dmft_hessian`): step size, budgets, start, weight decay, draws and seed.

        Returns
        -------
        dict
            ``lr``, ``steps`` (the first budget), ``max_steps`` (four times it), ``init_scale``,
            ``weight_decay``, ``n_samples`` and ``rng`` (the first seed).
        """
        return {
            "lr": self.lr,
            "steps": self.dmft_steps,
            "max_steps": 4 * self.dmft_steps,
            "init_scale": self.init_scale,
            "weight_decay": self.weight_decay,
            "n_samples": self.dmft_samples,
            "rng": self.seeds[0],
        }

    def dmft_hessian_options(self) -> dict:
        """:meth:`dmft_options` for :func:`rmt.dmft_hessian` with ``stop_at_plateau``: the budget
        ``max_steps`` is its ``steps`` (a maximum, since the solve stops at its plateau)."""
        options = self.dmft_options()
        options["steps"] = options.pop("max_steps")
        return options

    def n_of(self, delta: float) -> int:
        """Sample size ``n = round(delta * d)`` (at least 1)."""
        return max(1, int(round(delta * self.d)))

    def rng_for(self, delta: float, seed: int) -> np.random.Generator:
        """The generator of the data at ``(delta, seed)``:
        ``numpy.random.default_rng([seed, round(1e6 * delta)])``."""
        return np.random.default_rng([int(seed), int(round(1e6 * delta))])

    def to_dict(self, command: str | None = None) -> dict:
        """All fields (``k`` resolved); with ``command``, only those that can change its results."""
        out = asdict(self)
        out["k"] = self.model().k
        if command is None:
            return out
        keep = {
            f.name
            for f in fields(self)
            if command in f.metadata["commands"] and f.metadata.get("results", True)
        }
        return {key: value for key, value in out.items() if key in keep}
