"""Encoding of Optuna search spaces to the unit hypercube and back.

Notation:
    d: number of parameters; one encoded dimension per parameter.
    x: encoded point in [0, 1]^d.
    n_grid[j]: number of admissible values of a discrete dimension j (0 for continuous).

Continuous floats map linearly (in log space when ``log=True``). Ints and stepped floats on a
linear scale map each admissible value to the centre of an equal-width cell, (i + 0.5) / n_grid,
so that every value owns the same share of the cube. Log-scaled ints are continuous in
log space over [log(low - 0.5), log(high + 0.5)] and rounded when decoded. Categorical choices map
to cell centres too, with ``is_categorical`` set so that the kernel compares them by identity
(Hamming distance), not by their arbitrary order.

Grids of up to ``MAX_EXHAUSTIVE_GRID`` values (and every categorical) are ``is_discrete``: the
acquisition optimizer tries each of their values. A larger grid, e.g. ``suggest_int("seed", 0,
10**9)`` or a float with a fine step, is searched like a continuous dim and rounded to its cells,
as log-scaled ints are: trying a billion values would need gigabytes per suggestion.

Neighbourhood: two encoded points are the same point for the samplers (nothing near a pending
trial's point is proposed, two workers do not keep neighbouring claims) when they differ by at
most ``neighbourhood[j]`` in every dimension j. For ints, stepped floats and categoricals that is
half the gap between two admissible values, so that after rounding it means exactly the same value;
for floats without a step it is ``CONTINUOUS_NEIGHBOURHOOD`` of the encoded range (see there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from scipy.stats import qmc

_CONTINUOUS, _GRID, _LOG_INT, _CATEGORICAL = 0, 1, 2, 3
# Largest grid of an int or stepped float whose values the optimizer tries one by one.
MAX_EXHAUSTIVE_GRID = 1024
# Half-width, as a fraction of the encoded range (log range for log=True), of the box around a
# float's value within which another value counts as the same point. How a float acts on a
# model is unknown (``min_samples_split`` 0.04205132 and 0.04205113 train the same forest; a
# learning rate matters at any scale), so the box is small: 0.1 % of the range is a 0.4 % change
# of ``min_samples_split`` in [0.01, 0.5] (log), a sixth of a sample of its threshold at 0.04 of
# 1,000 rows, and a 0.9 % change of a learning rate in [1e-4, 1] (log). It is also below what a
# GP fitted to tens of trials tells apart: at a lengthscale of 5 % of the range, the Matern-5/2
# correlation of two points 0.1 % apart is 0.9997.
CONTINUOUS_NEIGHBOURHOOD = 1e-3
# Slack of every comparison with a neighbourhood's edge (float error of encoding and rounding).
NEAR_TOLERANCE = 1e-9


class SearchSpace:
    """An Optuna search space, parameter name -> Float, Int or Categorical distribution,
    encoded to [0, 1]^d."""

    def __init__(self, distributions: Mapping[str, BaseDistribution]) -> None:
        if not distributions:
            raise ValueError("`distributions` must not be empty.")
        self.names: list[str] = list(distributions)
        self.distributions: list[BaseDistribution] = [distributions[n] for n in self.names]
        self.dim = len(self.names)
        kinds, n_grid, lows, highs = [], [], [], []
        for name, dist in zip(self.names, self.distributions, strict=True):
            if isinstance(dist, CategoricalDistribution):
                kinds.append(_CATEGORICAL)
                n_grid.append(len(dist.choices))
                lows.append(0.0)
                highs.append(1.0)
            elif isinstance(dist, IntDistribution) and dist.log:
                kinds.append(_LOG_INT)
                n_grid.append(0)
                lows.append(math.log(dist.low - 0.5))
                highs.append(math.log(dist.high + 0.5))
            elif isinstance(dist, IntDistribution) or (
                isinstance(dist, FloatDistribution) and dist.step is not None
            ):
                step = dist.step
                assert step is not None  # always for ints; for floats by the condition above
                kinds.append(_GRID)
                n_grid.append(round((dist.high - dist.low) / step) + 1)
                lows.append(float(dist.low))
                highs.append(float(dist.high))
            elif isinstance(dist, FloatDistribution):
                kinds.append(_CONTINUOUS)
                n_grid.append(0)
                if dist.log:
                    lows.append(math.log(dist.low))
                    highs.append(math.log(dist.high))
                else:
                    lows.append(float(dist.low))
                    highs.append(float(dist.high))
            else:
                raise ValueError(
                    f"`distributions[{name!r}]` must be a Float, Int or Categorical distribution, "
                    f"but got {dist!r}."
                )
        self._kinds = np.array(kinds)
        self.n_grid = np.array(n_grid, dtype=int)
        self._lows = np.array(lows)
        self._highs = np.array(highs)
        self.is_categorical = self._kinds == _CATEGORICAL
        # Dimensions whose values are a small finite set: searched exhaustively by the optimizer.
        self.is_discrete = (self._kinds == _CATEGORICAL) | (
            (self._kinds == _GRID) & (self.n_grid <= MAX_EXHAUSTIVE_GRID)
        )
        # Floats without a step (linear or log): the only dims that take non-admissible-grid
        # values; log-scaled ints are searched continuously but take integer values.
        self.is_continuous = self._kinds == _CONTINUOUS
        self.neighbourhood = self._neighbourhood()  # (d,)

    def _neighbourhood(self) -> np.ndarray:
        """Half-widths (d,) of the box of points that count as the same point (module doc)."""
        half = np.empty(self.dim)
        for j, dist in enumerate(self.distributions):
            kind = self._kinds[j]
            if kind == _CONTINUOUS:
                half[j] = CONTINUOUS_NEIGHBOURHOOD
            elif kind == _LOG_INT:
                # Adjacent ints are closest at the top of the range: log(high / (high - 1)).
                assert isinstance(dist, IntDistribution)
                high = dist.high
                gap = math.log(high / (high - 1)) if high - 1 >= dist.low else 1.0
                half[j] = 0.5 * gap / (self._highs[j] - self._lows[j])
            else:  # one cell per admissible value: its centre +- half a cell
                half[j] = 0.5 / self.n_grid[j]
        return half

    def is_near(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Whether encoded points ``x`` (..., d) and ``y`` (..., d) count as the same point
        (within ``neighbourhood`` in every dimension); shape of the broadcast (...)."""
        return np.all(np.abs(np.asarray(x) - np.asarray(y)) <= self.neighbourhood + NEAR_TOLERANCE,
                      axis=-1)

    def neighbourhood_boxes(self, x: np.ndarray) -> np.ndarray:
        """The boxes (m, 2, d) of [low, high] corners of the points that count as the same as
        each encoded point of ``x`` (m, d)."""
        x = np.asarray(x, dtype=float).reshape(-1, self.dim)
        return np.stack([x - self.neighbourhood, x + self.neighbourhood], axis=1)

    def _encode_one(self, j: int, value: Any) -> float:
        dist = self.distributions[j]
        kind = self._kinds[j]
        if kind == _CATEGORICAL:
            assert isinstance(dist, CategoricalDistribution)
            return (dist.to_internal_repr(value) + 0.5) / self.n_grid[j]
        if kind == _GRID:
            index = round((float(value) - dist.low) / dist.step)  # type: ignore[attr-defined]
            return (min(max(index, 0), self.n_grid[j] - 1) + 0.5) / self.n_grid[j]
        assert isinstance(dist, (IntDistribution, FloatDistribution))
        v = math.log(value) if kind == _LOG_INT or dist.log else float(value)
        span = self._highs[j] - self._lows[j]
        return 0.5 if span == 0 else (v - self._lows[j]) / span

    def encode(self, params: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Encode parameter dicts, shape (n, d), values in [0, 1]."""
        out = np.empty((len(params), self.dim))
        for i, p in enumerate(params):
            for j, name in enumerate(self.names):
                out[i, j] = self._encode_one(j, p[name])
        return np.clip(out, 0.0, 1.0)

    def round(self, x: np.ndarray) -> np.ndarray:
        """Snap discrete dims of ``x`` (..., d) to their admissible values; clip to [0, 1]."""
        x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0).copy()
        for j in range(self.dim):
            kind = self._kinds[j]
            if kind in (_CATEGORICAL, _GRID):
                n = self.n_grid[j]
                x[..., j] = (np.clip(np.floor(x[..., j] * n), 0, n - 1) + 0.5) / n
            elif kind == _LOG_INT:
                span = self._highs[j] - self._lows[j]
                v = np.round(np.exp(self._lows[j] + x[..., j] * span))
                dist = self.distributions[j]
                v = np.clip(v, dist.low, dist.high)  # type: ignore[attr-defined]
                x[..., j] = (np.log(v) - self._lows[j]) / span
        return x

    def decode(self, x: np.ndarray) -> dict[str, Any]:
        """Decode one encoded point ``x`` (d,) to valid, python-native parameter values."""
        x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        params: dict[str, Any] = {}
        for j, (name, dist) in enumerate(zip(self.names, self.distributions, strict=True)):
            kind = self._kinds[j]
            index = int(min(math.floor(x[j] * self.n_grid[j]), self.n_grid[j] - 1))  # cells only
            if kind == _CATEGORICAL:
                assert isinstance(dist, CategoricalDistribution)
                params[name] = dist.choices[index]
                continue
            if kind == _GRID:
                value: float = dist.low + index * dist.step  # type: ignore[attr-defined]
            else:
                value = self._lows[j] + x[j] * (self._highs[j] - self._lows[j])
                if kind == _LOG_INT or dist.log:  # type: ignore[attr-defined]
                    value = math.exp(value)
            low, high = dist.low, dist.high  # type: ignore[attr-defined]
            value = min(max(value, low), high)
            if isinstance(dist, IntDistribution):
                params[name] = round(value)
            else:
                params[name] = float(value)
        return params

    def sample(self, n: int, rng: np.random.RandomState) -> np.ndarray:
        """``n`` scrambled-Sobol points, rounded, shape (n, d)."""
        sobol = qmc.Sobol(self.dim, scramble=True, seed=rng.randint(0, 2**31 - 1))
        # Sobol wants powers of two; draw the next one and keep n.
        points = sobol.random(1 << max(math.ceil(math.log2(max(n, 1))), 0))[:n]
        return self.round(points)

    def grid_values(self, j: int) -> np.ndarray:
        """Encoded admissible values of a discrete dimension ``j``."""
        n = self.n_grid[j]
        return (np.arange(n) + 0.5) / n
