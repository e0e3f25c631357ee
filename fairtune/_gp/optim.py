"""Maximize an acquisition function over the encoded search space.

Notation:
    acqf: maps a batch of candidate sets X (b, q, d) to values (b,); q = 1 for one point,
        q > 1 for a jointly chosen batch (e.g. one point per tenant).
    Continuous dims: floats, log-scaled ints and grids larger than
        ``search_space.MAX_EXHAUSTIVE_GRID`` (rounded at the end).
    Discrete dims: categoricals, and linear ints and stepped floats of at most that many values,
        searched over their grid.

Algorithm:
    1. Evaluate scrambled-Sobol candidate sets (and warm starts, e.g. the best observed point)
       without gradients; refine every warm start and the best of the others, up to
       ``n_local_search`` starts in all (at least one quasi-random one).
    2. Refine the continuous dims of the starts with L-BFGS-B, each on its own or all at once
       (on the sum over starts, whose gradient is each one's: the starts do not interact).
    3. Improve the discrete dims by a coordinate sweep over their admissible values.
    4. Round, re-evaluate, and return the best candidate set that is not excluded. A point to
       exclude excludes its neighbourhood (``SearchSpace.neighbourhood``: the same value of a
       discrete dim, a box of 0.1 % of the range of a continuous one). A refined point that
       ends inside such a neighbourhood is also tried just outside each face of it along its
       continuous dims, so that an acquisition peaking at a pending point yields the best point
       next to it rather than a distant, worse local optimum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.optimize
import torch

from fairtune._gp.search_space import NEAR_TOLERANCE, SearchSpace
from fairtune._threads import with_thread_limit

AcqFunc = Callable[[torch.Tensor], torch.Tensor]  # (b, q, d) -> (b,)

_CHUNK = 4096


def _evaluate(acqf: AcqFunc, X: np.ndarray) -> np.ndarray:
    out = []
    with torch.no_grad():
        for i in range(0, len(X), _CHUNK):
            out.append(acqf(torch.from_numpy(X[i : i + _CHUNK])).numpy())
    values = np.concatenate(out) if out else np.empty(0)
    return np.where(np.isfinite(values), values, -np.inf)


def _excluded(X: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """(b,) mask of candidate sets having a point inside one of the boxes (k, 2, d) of
    [low, high] corners (an excluded point is a box with low = high)."""
    return np.asarray(_inside(X, boxes).any(-1).any(-1))


def _inside(X: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """(b, q, k) mask: point i of candidate set b lies in box k; X (b, q, d), boxes (k, 2, d)."""
    low, high = boxes[:, 0], boxes[:, 1]  # (k, d)
    X_ = X[:, :, None, :]
    inside = (X_ >= low - NEAR_TOLERANCE) & (X_ <= high + NEAR_TOLERANCE)
    return np.asarray(inside.all(-1))


# How far beyond an excluded box's face a point stepped out of it is put.
_STEP_OUT = 1e-5


def _step_out(X: np.ndarray, boxes: np.ndarray, search_space: SearchSpace) -> np.ndarray:
    """Copies of the candidate sets (b, q, d) whose points lie in an excluded box, each with one
    point moved just outside one face of its (first) box along one dim searched continuously;
    shape (c, q, d), rounded (a rounded dim's box is half a cell wide: the move lands on the
    neighbouring admissible value). Faces outside the cube are skipped."""
    inside = _inside(X, boxes)  # (b, q, k)
    dims = np.flatnonzero(~search_space.is_discrete)
    out = []
    for b, i in zip(*np.nonzero(inside.any(-1)), strict=True):
        low, high = boxes[int(np.argmax(inside[b, i]))]
        for j in dims:
            for value in (low[j] - _STEP_OUT, high[j] + _STEP_OUT):
                if 0.0 <= value <= 1.0:
                    moved = X[b].copy()
                    moved[i, j] = value
                    out.append(moved)
    if not out:
        return np.empty((0, *X.shape[1:]))
    return search_space.round(np.stack(out)).reshape(-1, *X.shape[1:])


def _local_continuous(
    acqf: AcqFunc, X0: np.ndarray, cont: np.ndarray, max_iter: int
) -> np.ndarray:
    """L-BFGS-B on the continuous dims of the starts X0 (k, q, d): each on its own through an
    acquisition's numpy gradient, where a call costs microseconds and a joint search, which
    stops only when every start has converged, would take more calls (docs/benchmarks/fairbo.md);
    all at once through autograd, where a call's fixed cost outweighs its points."""
    in_numpy = getattr(acqf, "value_and_grad", None)
    in_numpy = None if in_numpy is None or in_numpy(X0) is None else in_numpy
    X = X0.copy()
    for starts in [X] if in_numpy is None else [X[i : i + 1] for i in range(len(X))]:  # views
        f = (_torch_value_and_grad(acqf, starts, cont) if in_numpy is None
             else _numpy_value_and_grad(in_numpy, starts, cont))
        z0 = starts[:, :, cont].ravel()
        result = scipy.optimize.minimize(
            f, z0, jac=True, method="L-BFGS-B", bounds=[(0.0, 1.0)] * len(z0),
            options={"maxiter": max_iter},
        )
        starts[:, :, cont] = result.x.reshape(starts.shape[0], starts.shape[1], -1)
    return X


def _numpy_value_and_grad(
    value_and_grad: Callable[[np.ndarray], Any], X0: np.ndarray, cont: np.ndarray
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The loss of :func:`_local_continuous` and its gradient from an acquisition's own numpy
    ``value_and_grad`` (e.g. :class:`~fairtune._gp.acquisition.LogConstrainedEI`'s)."""
    X = X0.copy()

    def f(z: np.ndarray) -> tuple[float, np.ndarray]:
        X[:, :, cont] = z.reshape(X0.shape[0], X0.shape[1], -1)
        values, grads = value_and_grad(X)
        finite = np.isfinite(values)
        values, grads = np.where(finite, values, 0.0), np.where(finite[:, None, None], grads, 0.0)
        return -float(values.sum()), np.nan_to_num(-grads[:, :, cont].ravel())

    return f


def _torch_value_and_grad(
    acqf: AcqFunc, X0: np.ndarray, cont: np.ndarray
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The loss of :func:`_local_continuous` and its gradient by autograd."""
    X_fixed = torch.from_numpy(X0.copy())
    mask = torch.from_numpy(np.broadcast_to(cont, X0.shape).copy())

    def f(z: np.ndarray) -> tuple[float, np.ndarray]:
        zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
        X = X_fixed.masked_scatter(mask, zt)
        values = acqf(X)
        # Non-finite values (numerical trouble far from the data) must not derail the others.
        values = torch.where(torch.isfinite(values), values, torch.zeros_like(values))
        loss = -values.sum()
        (grad,) = torch.autograd.grad(loss, zt)
        return loss.item(), np.nan_to_num(grad.numpy())

    return f


def _coordinate_sweep(
    acqf: AcqFunc, X: np.ndarray, values: np.ndarray, search_space: SearchSpace
) -> tuple[np.ndarray, np.ndarray]:
    """For each start, try every admissible value of each discrete dim; keep improvements."""
    k, q, _ = X.shape
    for i in range(q):
        for j in np.flatnonzero(search_space.is_discrete):
            grid = search_space.grid_values(int(j))
            trial = np.repeat(X[:, None], len(grid), axis=1)  # (k, g, q, d)
            trial[:, :, i, j] = grid[None, :]
            trial_values = _evaluate(acqf, trial.reshape(-1, q, X.shape[-1])).reshape(k, -1)
            best = trial_values.argmax(1)
            improve = trial_values[np.arange(k), best] > values
            X[improve, i, j] = grid[best[improve]]
            values = np.where(improve, trial_values[np.arange(k), best], values)
    return X, values


def _n_points(*args: object, exclude: np.ndarray | None = None,
              exclude_boxes: np.ndarray | None = None, **kwargs: object) -> int:
    """The problem's size: the points and boxes it excludes (the trials, pending ones)."""
    return sum(0 if a is None else len(a) for a in (exclude, exclude_boxes))


@with_thread_limit(_n_points)
def maximize_acqf(
    acqf: AcqFunc,
    search_space: SearchSpace,
    *,
    rng: np.random.RandomState,
    q: int = 1,
    n_preliminary_samples: int = 1024,
    n_local_search: int = 10,
    warm_starts: np.ndarray | None = None,  # (k, q, d)
    exclude: np.ndarray | None = None,  # (m, d)
    exclude_boxes: np.ndarray | None = None,  # (k, 2, d)
    max_iter: int = 30,
) -> tuple[np.ndarray, float]:
    """Return the best candidate set found, shape (q, d) (rounded, valid), and its value.

    Args:
        acqf: Batched acquisition (b, q, d) -> (b,), differentiable in X.
        search_space: The encoded space (for sampling, rounding and discrete dims).
        rng: Source of randomness (deterministic given its state).
        q: Number of points chosen jointly.
        n_preliminary_samples: Number of quasi-random candidate sets evaluated first.
        n_local_search: Number of candidates refined locally (warm starts included).
        warm_starts: Extra candidate sets that are always refined, e.g. the best observed
            point.
        exclude: Points that must not be returned, nor any point in their neighbourhood (see
            ``SearchSpace.neighbourhood``), e.g. pending or evaluated ones; when every
            candidate is excluded the best one is returned anyway.
        exclude_boxes: Boxes, as [low, high] corners (encoded), whose points must not be
            returned either (e.g. a region known to give the same result as trials already
            run); the same fallback applies.
        max_iter: L-BFGS-B iteration cap.
    """
    d = search_space.dim
    boxes = [np.empty((0, 2, d))]
    near_boxes = np.empty((0, 2, d))
    if exclude is not None and len(exclude):
        near_boxes = search_space.neighbourhood_boxes(exclude)
        boxes.append(near_boxes)
    if exclude_boxes is not None and len(exclude_boxes):
        boxes.append(np.asarray(exclude_boxes, dtype=float))
    excluded_boxes = np.concatenate(boxes)
    X = search_space.sample(n_preliminary_samples * q, rng).reshape(n_preliminary_samples, q, d)
    warm = np.asarray(np.empty((0, q, d)) if warm_starts is None else warm_starts)
    warm = warm.reshape(-1, q, d)
    X, n_warm = np.concatenate([search_space.round(warm), X]), len(warm)
    values = _evaluate(acqf, X)
    is_excluded = _excluded(X, excluded_boxes)
    ranked = np.argsort(-np.where(is_excluded, -np.inf, values), kind="stable")
    # Warm starts (e.g. the incumbent) are always refined: a constrained optimum usually lies on
    # a constraint's boundary, and the last digits are won by walking along it from the best
    # feasible point, whose acquisition value is rarely among the best quasi-random ones.
    # They count towards ``n_local_search``.
    others = ranked[~np.isin(ranked, np.arange(n_warm))]
    chosen = np.concatenate([np.arange(n_warm), others[: max(n_local_search - n_warm, 1)]])
    starts = X[chosen].copy()
    start_values = values[chosen]

    cont = ~search_space.is_discrete
    if cont.any():
        refined = search_space.round(_local_continuous(acqf, starts, cont, max_iter))
        refined_values = _evaluate(acqf, refined)
        better = refined_values > start_values
        starts[better] = refined[better]
        start_values = np.where(better, refined_values, start_values)
    if search_space.is_discrete.any():
        starts, start_values = _coordinate_sweep(acqf, starts, start_values, search_space)

    # Only out of the neighbourhoods of ``exclude``: stepping a hair's breadth out of a box of
    # one point (an evaluated trial given as a box) would propose that trial again and again
    # where the acquisition peaks at it, instead of a distant optimum.
    stepped = _step_out(starts, near_boxes, search_space)
    final = np.concatenate([starts, X[ranked[:1]], stepped])
    final_values = np.concatenate([start_values, values[ranked[:1]], _evaluate(acqf, stepped)])
    penalized = np.where(_excluded(final, excluded_boxes), -np.inf, final_values)
    best = int(np.argmax(penalized if np.isfinite(penalized).any() else final_values))
    return final[best], float(final_values[best])
