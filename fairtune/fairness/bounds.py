"""High-confidence bounds of a fairness metric on the population a model will meet: "its gap
is at most U, with 95 % confidence". A group's rate is the share of its rows (of one true
label for the error rates) that the model predicts 1.

Each ordered pair of groups (g, h) and rate is tested at the full level: a limit holds iff
``rate_g - rate_h <= eps`` for all of them (``rate_g >= r rate_h`` for a ratio), and a broken
limit has a pair whose own one-sided test passes with probability at most ``alpha``, so
certifying when every test passes errs as rarely, with no share of ``alpha`` per pair or rate
(an intersection-union test, Berger & Hsu 1996). Each test, inverted, bounds ``rate_g -
rate_h`` (``rate_g / rate_h``) at ``1 - alpha``; the metric's bound is the largest (smallest).

Notation: groups 1 and 0, ``x`` of ``n`` rows predicted 1; H0 ``p_1 <= p_0 + theta`` or
``p_1 <= theta p_0`` for true rates ``p``, whose smallest ``theta`` not rejected is the bound;
``e = x_1 / n_1 - x_0 / n_0 - theta`` (``x_1 / n_1 - theta x_0 / n_0``). ``method``:

- ``"score"`` (Miettinen & Nurminen 1985; Farrington & Manning 1990): rejects when ``z = e /
  sqrt(v)`` exceeds the normal quantile of ``1 - alpha``, ``v`` the variance of ``e`` at the
  likeliest rates on the null boundary times ``n / (n - 1)``. The narrowest; its level is
  asymptotic, above ``alpha`` at rates near 0 or 1 on few rows.
- ``"exact"`` (default; Chan 1998): the p-value is the largest probability, over true rates on
  the null boundary, of the tables whose ``z`` is at least the observed one; they lie above a
  staircase, as ``z`` grows with ``x_1`` and falls with ``x_0``, so the largest over the null
  lies on its boundary (Röhmel & Mansmann 1999). Only the rates of a ``1 - gamma`` confidence
  set are searched, and ``gamma`` is added (Berger & Boos 1994); each binomial is summed over a
  window plus the mass outside. Valid at every true rate pair; the bound is the first ``theta``
  passing on a grid up from Hoeffding's bound, bisected.
- ``"hoeffding"`` (Hoeffding 1963): rejects when ``e >= sqrt(log(1 / alpha) (1 / n_1 + c^2 /
  n_0) / 2)``, ``c`` = 1 (``theta`` for a ratio). The widest; valid for a randomized
  classifier's probabilities of predicting 1 as they are, whose means are its rates.

The exact and score tests count 0/1 predictions: a randomized classifier's (fairlearn's
ThresholdOptimizer) are drawn with a fixed seed, each a Bernoulli prediction at its rate. A
rate of no row is unknown (a gap's bound 1, a ratio's 0), as is a ratio of rates of 0: a model
that selects no one has a ratio of 1 but a bound of 0. Measured levels and widths:
``benchmarks/results/bounds_coverage.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fairtune._names import check_fraction, got
from fairtune._validation import sensitive_groups
from fairtune.fairness.metrics import METRICS, _aggregate, _check_binary, _group_rates

__all__ = ["METHODS", "metric_bound", "metric_bound_width"]

METHODS = ("exact", "score", "hoeffding")

_SCAN, _TOL = 12, 1e-5  # the exact bound's scan up from Hoeffding's, then bisection
_NUISANCE = 16  # points of the nuisance rate's grid, then as many around its best
_GAMMA = 0.02  # share of alpha spent on the exact test's confidence set of the nuisance rate
_SDS = 8  # half-width of each binomial's window, in standard deviations


def _check(alpha: float, method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {list(METHODS)}, but got "
                         f"{got('method', method)}.")
    check_fraction("alpha", alpha)


def _restricted(x1: Any, n1: Any, x0: Any, n0: Any, theta: Any, ratio: bool
                ) -> tuple[Any, Any]:
    """The rates (p_1, p_0) of greatest likelihood on the null boundary."""
    if ratio:  # Miettinen & Nurminen (1985): the smaller root, in a form stable at theta = 0
        b, x = n1 * theta + x1 + n0 + x0 * theta, x1 + x0
        p0 = 2 * x / (b + np.sqrt(np.maximum(b * b - 4 * (n1 + n0) * theta * x, 0.0)))
        return np.clip(theta * p0, 0.0, 1.0), p0
    # Farrington & Manning (1990), p_1 = p_0 + theta: a cubic solved by its trigonometric form.
    t, q1, q0 = n0 / n1, x1 / n1, x0 / n0
    a, b = 1 + t, -(1 + t + q1 + t * q0 + theta * (t + 2))
    c = theta ** 2 + theta * (2 * q1 + t + 1) + q1 + t * q0
    v = (b / (3 * a)) ** 3 - b * c / (6 * a * a) - q1 * theta * (1 + theta) / (2 * a)
    u = np.where(v < 0, -1.0, 1.0) * np.sqrt(np.maximum((b / (3 * a)) ** 2 - c / (3 * a), 0.0))
    w = (np.pi + np.arccos(np.clip(v / np.where(u != 0, u ** 3, 1.0), -1.0, 1.0))) / 3
    p1 = np.clip(2 * u * np.cos(w) - b / (3 * a), np.maximum(0, theta), np.minimum(1, 1 + theta))
    return p1, p1 - theta


def _z(x1: Any, n1: Any, x0: Any, n0: Any, theta: Any, ratio: bool) -> Any:
    """The score statistic; a table of no variance at its null rates is infinite."""
    e, c = x1 / n1 - (theta * x0 / n0 if ratio else x0 / n0 + theta), theta if ratio else 1.0
    p1, p0 = _restricted(x1, n1, x0, n0, theta, ratio)
    # Miettinen & Nurminen's n / (n - 1); below 2 rows, no variance estimate: a wide bound.
    m = n1 + n0
    v = (p1 * (1 - p1) / n1 + c * c * p0 * (1 - p0) / n0) * m / np.maximum(m - 1, 1e-9)
    return np.where(v > 0, e / np.sqrt(np.where(v > 0, v, 1.0)),
                    np.where(e == 0, 0.0, np.copysign(np.inf, e)))


def _lower(x1: Any, n1: Any, x0: Any, n0: Any, ratio: bool, alpha: float, method: str) -> Any:
    """For arrays of pairs, the smallest theta in [0, 1] (ratio) or [-1, 0] (difference) the
    score or Hoeffding test does not reject (it rejects those below): bisected."""
    from scipy.special import ndtri

    low = np.full(np.shape(x1), 0.0 if ratio else -1.0)
    high = low + 1.0
    for _ in range(50):
        theta = (low + high) / 2
        if method == "score":
            rejected = _z(x1, n1, x0, n0, theta, ratio) > ndtri(1 - alpha)
        else:  # Hoeffding: e weighs each row 1 / n_1 or c / n_0
            c = theta if ratio else 1.0
            e = x1 / n1 - (theta * x0 / n0 if ratio else x0 / n0 + theta)
            rejected = e >= np.sqrt(np.log(1 / alpha) * (1 / n1 + c * c / n0) / 2)
        low, high = np.where(rejected, theta, low), np.where(rejected, high, theta)
    return low  # the bisection's wide end


def _pmf(y: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """Binomial probabilities of ``y`` (W,) at each rate ``p`` (K,): (K, W)."""
    from scipy.special import gammaln, xlog1py, xlogy

    return np.exp(gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1)
                  + xlogy(y, p[:, None]) + xlog1py(n - y, -p[:, None]))


def _exact_pvalue(x1: int, n1: int, x0: int, n0: int, theta: float, ratio: bool,
                  gamma: float, sets: tuple[tuple[float, float], ...]) -> float:
    """The exact test's p-value; ``sets``: the Clopper-Pearson intervals of p_1 and p_0."""
    from scipy.special import bdtr, bdtrc

    (l1, u1), (l0, u0) = sets
    # The null boundary p_1 = h(p_0) within the confidence set, p_0 in [low, high].
    if ratio:
        low = max(l0, l1 / theta) if theta > 0 else (l0 if l1 == 0 else np.inf)
        high = min(u0, u1 / theta, 1.0) if theta > 0 else u0
    else:
        low, high = max(l0, l1 - theta, -theta, 0.0), min(u0, u1 - theta, 1.0 - theta, 1.0)
    if low > high:
        return gamma

    def h(p0: Any) -> Any:
        return np.clip(theta * p0 if ratio else p0 + theta, 0.0, 1.0)

    def window(n: int, p: float, q: float) -> tuple[int, int]:  # nearly all rows for [p, q]
        sd = _SDS * np.sqrt(n * min(max(0.5, p), q) * (1 - min(max(0.5, p), q))) + 1
        return max(int(n * p - sd), 0), min(int(np.ceil(n * q + sd)), n)

    (lo0, hi0), (lo1, hi1) = window(n0, low, high), window(n1, h(low), h(high))
    y0 = np.arange(lo0, hi0 + 1.0)
    # The tables as extreme as the observed one (ties too) are x_1 >= c(x_0): bisect c.
    z_obs = float(_z(x1, n1, x0, n0, theta, ratio))
    z_obs -= 1e-9 * (1 + abs(z_obs))
    below, c = np.full(y0.shape, lo1 - 1), np.full(y0.shape, hi1 + 1)
    while np.any(c - below > 1):
        middle = (below + c) // 2
        extreme = _z(middle.astype(float), n1, y0, n0, theta, ratio) >= z_obs
        below, c = np.where(extreme, below, middle), np.where(extreme, middle, c)

    def probability(p0: np.ndarray) -> np.ndarray:  # of those tables, from above
        p1, ones = h(p0), np.ones((len(p0), 1))
        tail = bdtrc(hi1, n1, p1)[:, None]  # P(x_1 > hi1); P(x_1 >= lo1) counts as 1
        survival = np.cumsum(_pmf(np.arange(hi1, lo1 - 1, -1.0), n1, p1), axis=1)[:, ::-1]
        survival = np.hstack([ones, survival[:, 1:] + tail, tail])  # P(x_1 >= lo1 + j)
        outside = (bdtr(lo0 - 1, n0, p0) if lo0 > 0 else 0.0) + bdtrc(hi0, n0, p0)
        return (_pmf(y0, n0, p0) * survival[:, c - lo1]).sum(axis=1) + outside

    grid = np.linspace(low, high, _NUISANCE)
    best = int(np.argmax(coarse := probability(grid)))
    fine = np.linspace(grid[max(best - 1, 0)], grid[min(best + 1, _NUISANCE - 1)], _NUISANCE)
    return float(max(coarse.max(), probability(fine).max())) + gamma


def _exact_test(x1: int, n1: int, x0: int, n0: int, ratio: bool, alpha: float
                ) -> Callable[[float], bool]:
    """Whether the exact test at level ``alpha`` passes (does not reject) a ``theta``."""
    from scipy.stats import binomtest

    gamma = _GAMMA * alpha
    sets = tuple(tuple(binomtest(x, n).proportion_ci(1 - gamma / 2))
                 for x, n in ((x1, n1), (x0, n0)))
    return lambda theta: _exact_pvalue(x1, n1, x0, n0, theta, ratio, gamma, sets) > alpha


def _exact_min_lower(x1: np.ndarray, n1: np.ndarray, x0: np.ndarray, n0: np.ndarray,
                     ratio: bool, alpha: float) -> float:
    """The smallest over pairs of the smallest theta the exact test does not reject."""
    hoeffding = _lower(x1, n1, x0, n0, ratio, alpha, "hoeffding")
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = np.where(x1 == 0, 0.0, x1 / n1 / (x0 / n0)) if ratio else x1 / n1 - x0 / n0
    smallest = 1.0 if ratio else 0.0
    for i in np.argsort(hoeffding):  # the likeliest smallest first: most pairs then cost 1 test
        passes = _exact_test(int(x1[i]), int(n1[i]), int(x0[i]), int(n0[i]), ratio, alpha)
        smallest = min(smallest, float(observed[i]))  # a bound is at most the observed value
        if hoeffding[i] >= smallest or not passes(smallest):
            continue  # rejected at the current smallest: this pair's bound is above it
        grid = np.linspace(hoeffding[i], smallest, _SCAN)
        k = next(k for k, theta in enumerate(grid) if passes(theta))
        if k == 0:  # not rejected at Hoeffding's bound: the whole domain
            return 0.0 if ratio else -1.0
        low, high = grid[k - 1], grid[k]
        while high - low > _TOL:
            middle = (low + high) / 2
            low, high = (low, middle) if passes(middle) else (middle, high)
        smallest = low
    return smallest


def _bound(aggregate: str, rates: np.ndarray, sizes: np.ndarray, alpha: float,
           method: str) -> float:
    """The metric's bound from each group's rates and rows, shape (groups, rates)."""
    ratio = aggregate == "ratio"
    if not np.all(sizes > 0):
        return 0.0 if ratio else 1.0  # a rate of no row can be anything
    # Ordered pairs (1, 0): lower bounds of rate_1 / rate_0, or of rate_1 - rate_0 = -gap_01.
    one, zero = np.nonzero(~np.eye(len(rates), dtype=bool))
    n = sizes.astype(float)
    x = np.rint(rates * n) if method == "exact" else rates * n
    x1, n1, x0, n0 = (a.ravel() for a in (x[one], n[one], x[zero], n[zero]))
    if method == "exact":
        smallest = _exact_min_lower(x1, n1, x0, n0, ratio, alpha)
    else:
        smallest = float(_lower(x1, n1, x0, n0, ratio, alpha, method).min())
    return float(np.clip(smallest if ratio else -smallest, 0.0, 1.0))


def metric_bound(name: str, y_true: Any, y_pred: Any, *, sensitive_features: Any,
                 alpha: float, method: str = "exact") -> float:
    """A one-sided ``1 - alpha`` confidence bound of fairness metric ``name`` on the
    population the rows are drawn from: the largest over the ordered pairs (g, h) of groups and
    the metric's rates of an upper bound of ``rate_g - rate_h`` (a gap), or the smallest of a
    lower bound of ``rate_g / rate_h`` (a ratio). A limit is certified iff the bound keeps it;
    a model whose metric on the population breaks it is then certified with probability at
    most ``alpha`` (the intersection-union test of the module docstring).

    Args:
        name: A metric of :data:`fairtune.fairness.METRICS` (canonical name).
        y_true: True 0/1 labels of rows the model was not chosen or fitted on.
        y_pred: The model's 0/1 predictions of them, or a randomized classifier's
            probabilities of predicting 1.
        sensitive_features: The group of each row.
        alpha: The error probability of the bound (of a certificate), in (0, 1).
        method: The test of each pair of groups, one of :data:`METHODS`. Defaults to
            ``"exact"``.

    Raises:
        ValueError: For a ``method`` not in :data:`METHODS` or ``alpha`` outside (0, 1).
    """
    _check(alpha, method)
    spec = METRICS[name]
    y = _check_binary(y_true, "y_true")
    p = np.asarray(y_pred, dtype=float)
    if method != "hoeffding" and not np.isin(p, (0.0, 1.0)).all():
        p = (np.random.default_rng(0).random(len(p)) < p).astype(float)
    groups = sensitive_groups(sensitive_features, len(y))
    with np.errstate(divide="ignore", invalid="ignore"):  # a rate of no row is NaN
        rates, sizes = _group_rates(spec.rates, y, p, groups)
    return _bound(spec.aggregate, rates, sizes, alpha, method)


def metric_bound_width(name: str, sizes: Any, rates: Any, *, alpha: float,
                       method: str = "exact") -> float:
    """How far :func:`metric_bound` lies from the measured metric for groups of ``sizes``
    rows (shape (groups, rates of the metric), any numbers) whose rates are ``rates`` (that
    shape, or a number); for equal rates, a gap's bound or 1 - a ratio's. It falls as the sizes
    grow. For ``"exact"`` it is the score test's width, cheap and continuous in the sizes; the
    exact bound is a little wider (``benchmarks/results/bounds_coverage.md``)."""
    _check(alpha, method)
    spec = METRICS[name]
    sizes = np.asarray(sizes, dtype=float)
    rates = np.broadcast_to(np.asarray(rates, dtype=float), sizes.shape)
    bound = _bound(spec.aggregate, rates, sizes, alpha, "score" if method == "exact" else method)
    measured = float(_aggregate(rates, spec.aggregate))
    return bound - measured if spec.aggregate == "difference" else measured - bound
