"""Fairness *between tenants* of a shared study: G2SF welfare, inequality, fair regret.

Notation (Sim, Zhang, Low, Jaillet, ICML 2021, "Collaborative Bayesian Optimization with Fair
Regret"):
    n tenants; u_i: tenant i's cumulative utility (sum of its observed values, negated for a
    minimized objective); u_(1) <= ... <= u_(n): the same sorted ascending.
    w_i = rho^(i-1), 0 < rho <= 1: generalized Gini social-evaluation (G2SF) weights; the worst
    off tenant gets the largest weight. rho = 1 is the plain sum (utilitarian), smaller rho is
    more egalitarian.
    g(u) = sum_i w_i u_(i); normalized: g(u) / sum_i w_i.
    Inequality: U/n - g_norm(u) >= 0 with U = sum_i u_i (0 iff all u_i are equal).
    Fair cumulative regret after T rounds with optimum f*:
        S_T = T f* - g_norm(u_T)   (the normalized G2SF of the ideal utilities T f* 1 minus that
        of the achieved ones), so that S_T = R_T / n + inequality with R_T / n = T f* - U_T / n.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import optuna

__all__ = [
    "TenantFairnessCallback",
    "fair_cumulative_regret",
    "g2sf_weights",
    "generalized_gini",
    "gini_inequality",
]

_logger = logging.getLogger("fairtune")


def _check_rho(rho: float) -> float:
    if isinstance(rho, bool) or not (isinstance(rho, (int, float)) and 0.0 < rho <= 1.0):
        raise ValueError(f"`rho` must be in (0, 1], but got rho={rho!r}.")
    return float(rho)


def g2sf_weights(n: int, rho: float) -> np.ndarray:
    """G2SF weights ``w_i = rho^(i-1)``, i = 1..n (largest weight for the worst-off tenant)."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`n` must be a positive integer, but got n={n!r}.")
    return _check_rho(rho) ** np.arange(n, dtype=float)


def _utilities(u: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(u, dtype=float)
    if array.ndim != 1 or len(array) == 0:
        raise ValueError(
            f"`u` must be a non-empty 1-d sequence of utilities, but got shape {array.shape}.")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"`u` must be finite, but got {array.tolist()}.")
    return array


def generalized_gini(
    u: Sequence[float] | np.ndarray,
    rho: float = 0.5,
    normalize: bool = True,
    *,
    w: Sequence[float] | None = None,
) -> float:
    """Generalized Gini social welfare ``g(u) = sum_i w_i u_(i)`` (u sorted ascending).

    Args:
        u: Utilities of the n tenants.
        rho: Weight decay, ``w_i = rho^(i-1)``. Defaults to 0.5.
        normalize: Divide by ``sum_i w_i`` (a weighted mean). Defaults to True.
        w: Explicit non-increasing non-negative weights instead of ``rho``. Defaults to None.

    Example:
        >>> generalized_gini([5, 5], w=[3, 1], normalize=False)
        20.0
        >>> generalized_gini([8, 2], w=[3, 1], normalize=False)
        14.0
    """
    values = np.sort(_utilities(u))
    if w is None:
        weights = g2sf_weights(len(values), rho)
    else:
        weights = np.asarray(w, dtype=float)
        if weights.shape != values.shape or np.any(weights < 0) or np.any(np.diff(weights) > 0):
            raise ValueError(f"`w` must be {len(values)} non-negative, non-increasing weights, "
                             f"but got {list(w)}.")
    total = float(weights @ values)
    return total / float(weights.sum()) if normalize else total


def gini_inequality(u: Sequence[float] | np.ndarray, rho: float = 0.5) -> float:
    """Inequality ``mean(u) - g_norm(u)`` (>= 0, 0 iff all tenants have the same utility)."""
    values = _utilities(u)
    return float(values.mean() - generalized_gini(values, rho, normalize=True))


def fair_cumulative_regret(
    utilities: np.ndarray | Sequence[Sequence[float]], optimum: float, rho: float = 0.5
) -> float:
    """Fair cumulative regret ``S_T = T f* - g_norm(sum_t u_t)`` after T rounds.

    The fair regret of Sim et al. (2021) (see the module's Notation): the ideal, every tenant
    getting f* in every round, against the tenants' *cumulative* utilities; with rho = 1,
    S_T = R_T / n. (Multiply by sum_i w_i for the unnormalized form.)

    Args:
        utilities: Per-round utilities, shape (T, n): row t holds each tenant's value in round t
            (of the maximized function; negate a minimized objective's values).
        optimum: The optimal value f* of that function.
        rho: G2SF weight decay in (0, 1]. Defaults to 0.5.

    Example:
        >>> fair_cumulative_regret([[1.0, 0.5], [1.0, 0.5]], optimum=1.0, rho=0.5)
        0.6666666666666667
    """
    array = np.asarray(utilities, dtype=float)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"`utilities` must have shape (T, n), but got shape {array.shape}.")
    T = array.shape[0]
    return float(T * optimum - generalized_gini(array.sum(0), rho, normalize=True))


@dataclass
class _Record:
    trial: int
    utilities: dict[str, float] = field(default_factory=dict)
    inequality: float = math.nan


class TenantFairnessCallback:
    """Optuna callback reporting each tenant's cumulative utility and the inequality.

    After every finished trial it recomputes :func:`fairtune.tenancy.cumulative_utilities`
    and :func:`gini_inequality`, logs them on the ``"fairtune"`` logger and appends them to
    :attr:`history`.

    Args:
        rho: G2SF weight decay used for the inequality. Defaults to 0.5.
        tenants: Tenants to report (others are ignored). Defaults to every tenant seen.

    Example:
        .. code-block:: python

            callback = TenantFairnessCallback(rho=0.5)
            study.optimize(objective, n_trials=30, callbacks=[callback])
            callback.last  # {"utilities": {"a": ..., "b": ...}, "inequality": ...}
    """

    def __init__(self, *, rho: float = 0.5, tenants: Sequence[str] | None = None) -> None:
        self.rho = _check_rho(rho)
        self.tenants = None if tenants is None else [str(t) for t in tenants]
        self.history: list[_Record] = []

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        from fairtune.tenancy import cumulative_utilities

        utilities = cumulative_utilities(study, tenants=self.tenants)
        inequality = gini_inequality(list(utilities.values()), self.rho) if utilities else math.nan
        self.history.append(_Record(trial.number, utilities, inequality))
        _logger.info("Trial %d: cumulative utilities %s, inequality %.4g.", trial.number,
                     ", ".join(f"{k}={v:.4g}" for k, v in utilities.items()), inequality)

    @property
    def last(self) -> dict[str, Any]:
        """The latest record as a dict (utilities and inequality)."""
        if not self.history:
            return {}
        record = self.history[-1]
        return {"utilities": record.utilities, "inequality": record.inequality}
