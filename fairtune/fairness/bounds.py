"""High-confidence bounds of a fairness metric on the population a model will meet.

A gap measured on validation rows is an estimate; a reviewer signs a bound: "the gap of this
model on the population is at most U, with 95 % confidence". Each group's rate (its selection
rate, or its true or false positive rate) is the mean of the model's predictions over the
group's rows (of one true label for the error rates): 0/1 predictions, or for a randomized
classifier (fairlearn's ThresholdOptimizer and reductions) its probabilities of predicting 1,
whose mean is the randomized classifier's rate itself. Either way a rate is the mean of
independent values in [0, 1], for which Chernoff's bound holds:

    P(mean - mu >= t) <= exp(-n kl(mu + t || mu)),   kl(p || q) the Bernoulli relative entropy,

so ``U = max {q >= p_hat : n kl(p_hat || q) <= log(1 / d)}`` is an upper confidence bound of the
rate at level ``1 - d`` (and ``L`` a lower one alike): tighter than Hoeffding's bound away from
1/2, and valid for probabilities as well as for 0/1 predictions (a Bernoulli variable has the
largest moment generating function of all the variables in [0, 1] with its mean). For 0/1
predictions a rate is a binomial proportion, and the exact Clopper-Pearson bounds, a little
tighter still, are used instead.

A gap ``max_g rate_g - min_g rate_g`` is the largest difference ``rate_g - rate_h`` over the
ordered pairs of groups. The observed difference of two groups' means of ``n_g`` and ``n_h``
independent values in [0, 1] exceeds the true one by ``t`` with probability at most
``exp(-2 t^2 / (1 / n_g + 1 / n_h))`` (Hoeffding), so every difference, and the gap with it, is
at most ``p_hat_g - p_hat_h + sqrt(log(1 / d) (1 / n_g + 1 / n_h) / 2)`` when all these bounds
hold, which a union bound over the ``groups * (groups - 1) * rates`` of them makes true with
probability ``1 - delta`` (each at ``d = delta / (groups * (groups - 1) * rates)``). A bound of
each group's rate on its own would count the smallest group's width twice. A ratio
``min_g rate_g / max_g rate_g`` is at least ``min_g L_g / max_g U_g``, with every group's
bounds at ``delta / (2 * groups * rates)``. The ratio of a model that selects no row is 1 on
those rows (:func:`fairtune.fairness.disparate_impact_ratio`), but its bound is 0: each rate is
only known to be below its upper bound, and the ratio of small rates can be anything; the ratio
is 1 on the population only if every upper bound were 0, which no number of rows shows. A model
that selects every row is bounded near 1. The caller spends ``delta`` over the limits and
the candidate models it tests (see :mod:`fairtune.tuning._certify`).

Notation: ``p_hat`` a group's observed rate, ``n`` its rows, ``d`` a one-sided bound's error
probability, ``delta`` the error probability of a metric's bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairtune._validation import sensitive_groups
from fairtune.fairness.metrics import METRICS, _check_binary, _group_rates

__all__ = ["kl_lower", "kl_upper", "metric_bound", "metric_bound_width"]


def _kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Bernoulli relative entropy kl(p || q), elementwise, with 0 log 0 = 0."""
    p = np.clip(p, 0.0, 1.0)
    q = np.clip(q, 1e-300, 1.0 - 1e-16)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(p > 0, p * np.log(p / q), 0.0)
        second = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return first + second


def _invert(p_hat: Any, n: Any, d: float, upper: bool) -> np.ndarray:
    p_hat = np.asarray(p_hat, dtype=float)
    n = np.asarray(n, dtype=float)
    budget = np.log(1.0 / d) / np.maximum(n, 1.0)
    low = p_hat.copy() if upper else np.zeros_like(p_hat)
    high = np.ones_like(p_hat) if upper else p_hat.copy()
    for _ in range(60):  # bisection: 2**-60 is below any rate's resolution
        middle = (low + high) / 2
        inside = _kl(p_hat, middle) <= budget
        if upper:
            low, high = np.where(inside, middle, low), np.where(inside, high, middle)
        else:
            low, high = np.where(inside, low, middle), np.where(inside, middle, high)
    bound = high if upper else low
    # A rate of no row is unknown: anything in [0, 1].
    return np.where(n > 0, bound, 1.0 if upper else 0.0)


def kl_upper(p_hat: Any, n: Any, d: float) -> np.ndarray:
    """Upper confidence bound, at level ``1 - d``, of the mean of ``n`` independent values in
    [0, 1] whose observed mean is ``p_hat`` (elementwise)."""
    return _invert(p_hat, n, d, upper=True)


def kl_lower(p_hat: Any, n: Any, d: float) -> np.ndarray:
    """Lower confidence bound, at level ``1 - d``, of the mean of ``n`` values in [0, 1]."""
    return _invert(p_hat, n, d, upper=False)


def _clopper_pearson(p_hat: np.ndarray, n: np.ndarray, d: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Exact one-sided binomial bounds (upper, lower) at level ``1 - d`` each."""
    from scipy.stats import beta

    k = np.rint(p_hat * n)
    with np.errstate(invalid="ignore"):
        upper = np.where(k >= n, 1.0, beta.ppf(1 - d, k + 1, np.maximum(n - k, 1e-12)))
        lower = np.where(k <= 0, 0.0, beta.ppf(d, np.maximum(k, 1e-12), n - k + 1))
    return (np.where(n > 0, upper, 1.0), np.where(n > 0, lower, 0.0))


def _difference_bound(rates: np.ndarray, sizes: np.ndarray, delta: float) -> float:
    """An upper bound of the largest gap from per-group rates and sizes (groups, rates)."""
    groups = rates.shape[0]
    d = delta / max(groups * (groups - 1) * rates.shape[1], 1)
    n = np.maximum(sizes.astype(float), 1e-300)
    spread = 1.0 / n[:, None, :] + 1.0 / n[None, :, :]  # (groups, groups, rates)
    gaps = rates[:, None, :] - rates[None, :, :] + np.sqrt(np.log(1.0 / d) * spread / 2.0)
    gaps[np.arange(groups), np.arange(groups)] = 0.0
    return float(np.clip(gaps.max(), 0.0, 1.0))


def _ratio_bound(high: np.ndarray, low: np.ndarray) -> float:
    """A lower bound of the smallest ratio from per-group bounds (groups, rates)."""
    top = high.max(axis=0)
    return float(np.where(top > 0, low.min(axis=0) / np.where(top > 0, top, 1.0), 1.0).min())


def metric_bound(name: str, y_true: Any, y_pred: Any, *, sensitive_features: Any,
                 delta: float) -> float:
    """A bound, holding with probability at least ``1 - delta``, of fairness metric ``name`` of
    the model on the population the rows are drawn from: an upper bound of a gap, a lower
    bound of the disparate impact ratio.

    Args:
        name: A metric of :data:`fairtune.fairness.METRICS` (canonical name).
        y_true: True 0/1 labels of rows the model was not chosen or fitted on.
        y_pred: The model's 0/1 predictions of them, or a randomized classifier's
            probabilities of predicting 1.
        sensitive_features: The group of each row.
        delta: The bound's error probability, in (0, 1).
    """
    spec = METRICS[name]
    y = _check_binary(y_true, "y_true")
    p = np.asarray(y_pred, dtype=float)
    groups = sensitive_groups(sensitive_features, len(y))
    rates, sizes = _group_rates(spec.rates, y, p, groups)
    if spec.aggregate == "difference":
        return _difference_bound(rates, sizes, delta)
    d = delta / (2 * rates.size)
    if np.isin(p, (0.0, 1.0)).all():
        high, low = _clopper_pearson(rates, sizes.astype(float), d)
    else:
        high, low = kl_upper(rates, sizes, d), kl_lower(rates, sizes, d)
    return _ratio_bound(high, low)


def metric_bound_width(name: str, sizes: Any, rates: Any, *, delta: float) -> float:
    """How far :func:`metric_bound` lies from the observed metric for groups of ``sizes`` rows
    (shape (groups, rates)) whose rates are all ``rates`` (same shape, or a number): the
    margin a search must keep under a limit for its models to be certified on such rows."""
    spec = METRICS[name]
    sizes = np.asarray(sizes, dtype=float)
    rates = np.broadcast_to(np.asarray(rates, dtype=float), sizes.shape)
    if spec.aggregate == "difference":  # the bound of groups whose rates are equal
        return _difference_bound(np.zeros_like(sizes), sizes, delta)
    d = delta / (2 * sizes.size)
    high, low = kl_upper(rates, sizes, d), kl_lower(rates, sizes, d)
    return float((1.0 - low.min(axis=0) / np.maximum(high.max(axis=0), 1e-12)).max())
