"""Maximize an acquisition function over the encoded search space.

Notation:
    acqf: maps a batch of candidate sets X (b, q, d) to values (b,); q = 1 for one point,
        q > 1 for a jointly chosen batch (e.g. one point per tenant). Rows must not interact:
        the gradient of acqf(X).sum() w.r.t. X[i] is taken as the gradient of acqf at X[i].
    k: number of local searches (``n_local_search``).
    Continuous dims: floats and log-scaled ints (rounded at the end).
    Discrete dims: linear ints, stepped floats and categoricals, searched over their grid.

Algorithm:
    1. Evaluate scrambled-Sobol candidate sets (and warm starts, e.g. the best observed point)
       without gradients; keep the k best that are not excluded as starts.
    2. Refine the continuous dims of every start by its own projected L-BFGS run; the k runs
       advance together, so each iteration costs ONE batched acqf call with autograd (not k
       small ones, and not one big summed problem, whose shared line search would hold every
       start back to the slowest). Variables are scaled by ``scales`` (preconditioning).
    3. Improve the discrete dims by a coordinate sweep over their admissible values (batched
       over starts and grid values); starts whose discrete values changed go back to step 2,
       at most ``_MAX_ALTERNATIONS`` times.
    4. Round, re-evaluate, and return the best candidate set that is not excluded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

from fairtune._gp.search_space import SearchSpace

AcqFunc = Callable[[torch.Tensor], torch.Tensor]  # (b, q, d) -> (b,)

_CHUNK = 4096
_MAX_ALTERNATIONS = 3
# Loss reported to the local search where the acquisition is not finite (numerical trouble far
# from the data): large, so that the line search backs off.
_BAD_LOSS = 1e10


@contextmanager
def single_threaded_torch() -> Iterator[None]:
    """Run torch with one intra-op thread inside the block (restored afterwards).

    The optimizer issues many small tensor operations, for which thread start-up and contention
    cost more than they save (and the machine is usually shared with other work).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _evaluate(acqf: AcqFunc, X: np.ndarray) -> np.ndarray:
    """acqf without gradients, in chunks; non-finite values become -inf. X (b, q, d) -> (b,)."""
    out = []
    with torch.no_grad():
        for i in range(0, len(X), _CHUNK):
            out.append(acqf(torch.from_numpy(X[i : i + _CHUNK])).detach().numpy())
    values = np.concatenate(out) if out else np.empty(0)
    return np.where(np.isfinite(values), values, -np.inf)


def _excluded(X: np.ndarray, exclude: np.ndarray | None) -> np.ndarray:
    """(b,) mask of candidate sets having a point equal to an excluded point (m, d)."""
    if exclude is None or len(exclude) == 0:
        return np.zeros(len(X), dtype=bool)
    diff = np.abs(X[:, :, None, :] - exclude[None, None, :, :]).max(-1)  # (b, q, m)
    return (diff < 1e-9).any(-1).any(-1)


def batched_lbfgsb(
    loss_and_grad: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    z0: np.ndarray,  # (k, m)
    bounds: np.ndarray,  # (m, 2)
    *,
    max_iter: int,
    memory: int = 10,
    pgtol: float = 1e-5,
    ftol: float = 1e-9,
    max_line_search: int = 20,
) -> np.ndarray:  # (k, m)
    """Minimize k independent box-constrained problems at once (projected L-BFGS).

    ``loss_and_grad(z, index)`` maps queries z (b, m) of the runs ``index`` (b,) (increasing,
    b <= k) to losses (b,) and gradients (b, m); every call serves all runs that need an
    evaluation, so an iteration costs one batched call (plus one per backtracking step).

    Per run and iteration: variables at a bound whose gradient pushes outwards are held fixed;
    the L-BFGS two-loop recursion (last ``memory`` pairs with s^T y > 0) gives a direction p on
    the free ones (steepest descent if p is not a descent direction); a projected backtracking
    line search accepts the first t with f(P(z + t p)) <= f(z) + 1e-4 g^T (P(z + t p) - z),
    shrinking t by safeguarded quadratic interpolation. A run stops when its projected gradient
    is below ``pgtol``, when the predicted or achieved decrease is below ``ftol`` relative to
    max(|f|, 1), when its line search fails, or after ``max_iter`` iterations.
    """
    k, m = z0.shape
    lo, hi = bounds[:, 0], bounds[:, 1]
    z = np.clip(z0, lo, hi).astype(float)
    f, g = loss_and_grad(z, np.arange(k))
    f, g = np.array(f, dtype=float), np.array(g, dtype=float)
    S = np.zeros((k, memory, m))
    Y = np.zeros((k, memory, m))
    rho = np.zeros((k, memory))
    n_mem = np.zeros(k, dtype=int)  # stored pairs (ring buffer, newest at head - 1)
    head = np.zeros(k, dtype=int)
    active = np.isfinite(f) & np.all(np.isfinite(g), axis=1)
    for _ in range(max_iter):
        pg = z - np.clip(z - g, lo, hi)
        active &= np.abs(pg).max(axis=1) > pgtol
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        zi, gi, fi = z[idx], g[idx], f[idx]
        free = ~(((zi <= lo) & (gi > 0)) | ((zi >= hi) & (gi < 0)))
        p = _two_loop(gi * free, S[idx], Y[idx], rho[idx], n_mem[idx], head[idx]) * free
        slope = (p * gi).sum(axis=1)
        steepest = ~(slope < 0)
        p[steepest] = -(gi * free)[steepest]
        n_mem[idx[steepest]] = 0
        slope = (p * gi).sum(axis=1)
        tol = ftol * np.maximum(np.abs(fi), 1.0)
        # Nothing left to gain (also keeps the Armijo test out of rounding noise).
        hopeless = -slope <= tol
        active[idx[hopeless]] = False
        # Without curvature information, a first step of unit length (as L-BFGS-B does).
        norm = np.linalg.norm(p, axis=1)
        t = np.where(n_mem[idx] == 0, np.minimum(1.0, 1.0 / np.maximum(norm, 1e-300)), 1.0)
        searching = ~hopeless
        z_new, f_new, g_new = zi.copy(), fi.copy(), gi.copy()
        for _ in range(max_line_search):
            rows = np.flatnonzero(searching)
            if len(rows) == 0:
                break
            cand = np.clip(zi[rows] + t[rows, None] * p[rows], lo, hi)
            fc, gc = loss_and_grad(cand, idx[rows])
            fc, gc = np.array(fc, dtype=float), np.array(gc, dtype=float)
            step = cand - zi[rows]
            decrease = (step * gi[rows]).sum(axis=1)
            finite = np.isfinite(fc) & np.all(np.isfinite(gc), axis=1)
            ok = finite & (fc <= fi[rows] + 1e-4 * decrease)
            acc = rows[ok]
            z_new[acc], f_new[acc], g_new[acc] = cand[ok], fc[ok], gc[ok]
            searching[acc] = False
            # Minimizer of the quadratic through f(0), f'(0) and f(t), kept in [t/10, t/2].
            bad = rows[~ok]
            tb, d0 = t[bad], slope[bad]
            curv = fc[~ok] - fi[bad] - d0 * tb
            with np.errstate(divide="ignore", invalid="ignore"):
                t_quad = -d0 * tb * tb / (2.0 * curv)
            t_quad = np.where(finite[~ok] & np.isfinite(t_quad), t_quad, 0.5 * tb)
            t[bad] = np.clip(t_quad, 0.1 * tb, 0.5 * tb)
        active[idx[searching]] = False  # a failed line search ends the run where it is
        done = np.flatnonzero(~searching & ~hopeless)
        j = idx[done]
        s = z_new[done] - z[j]
        y = g_new[done] - g[j]
        sy = (s * y).sum(axis=1)
        small_change = f[j] - f_new[done] <= tol[done]
        z[j], f[j], g[j] = z_new[done], f_new[done], g_new[done]
        good = sy > 1e-10 * np.maximum((y * y).sum(axis=1), 1e-300)
        jj = j[good]
        slot = head[jj]
        S[jj, slot] = s[good]
        Y[jj, slot] = y[good]
        rho[jj, slot] = 1.0 / sy[good]
        head[jj] = (slot + 1) % memory
        n_mem[jj] = np.minimum(n_mem[jj] + 1, memory)
        active[j[small_change]] = False
    return z


def _two_loop(
    g: np.ndarray,  # (b, m)
    S: np.ndarray,  # (b, M, m)
    Y: np.ndarray,  # (b, M, m)
    rho: np.ndarray,  # (b, M)
    n_mem: np.ndarray,  # (b,)
    head: np.ndarray,  # (b,)
) -> np.ndarray:  # (b, m)
    """-H g by the L-BFGS two-loop recursion, for runs with different memory lengths."""
    b, M, _ = S.shape
    q = g.copy()
    alpha = np.zeros((b, M))
    rows = np.arange(b)
    # Newest pair first: slot (head - 1 - i) mod M, used where i < n_mem.
    for i in range(M):
        use = i < n_mem
        if not use.any():
            break
        slot = (head - 1 - i) % M
        s, y, r = S[rows, slot], Y[rows, slot], rho[rows, slot]
        a = np.where(use, r * (s * q).sum(axis=1), 0.0)
        alpha[:, i] = a
        q -= a[:, None] * y
    newest = (head - 1) % M
    s, y = S[rows, newest], Y[rows, newest]
    yy = (y * y).sum(axis=1)
    gamma = np.where((n_mem > 0) & (yy > 0), (s * y).sum(axis=1) / np.maximum(yy, 1e-300), 1.0)
    r = gamma[:, None] * q
    for i in reversed(range(M)):
        use = i < n_mem
        if not use.any():
            continue
        slot = (head - 1 - i) % M
        s, y, rr = S[rows, slot], Y[rows, slot], rho[rows, slot]
        beta = np.where(use, rr * (y * r).sum(axis=1), 0.0)
        r += (alpha[:, i] - beta)[:, None] * s * use[:, None]
    return -r


def _local_continuous(
    acqf: AcqFunc,
    X0: np.ndarray,  # (k, q, d)
    cont: np.ndarray,  # (d,) bool
    scales: np.ndarray,  # (d,)
    max_iter: int,
) -> np.ndarray:  # (k, q, d)
    """L-BFGS-B on the continuous dims of every start; each start is its own problem.

    The variables are z = x / scale per dim, which equalizes the curvature across dims when the
    scales are the kernel lengthscales (the acquisition then varies on a unit scale in z).
    """
    k, q, _ = X0.shape
    s = np.tile(scales[cont], q)  # (q * d_cont,)
    s_t = torch.from_numpy(s)
    mask = torch.from_numpy(np.broadcast_to(cont, X0.shape[1:]).copy())  # (q, d)
    X_fixed = torch.from_numpy(X0.copy())

    def loss_and_grad(z: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b = len(z)
        zt = torch.from_numpy(z).requires_grad_(True)
        X = X_fixed[torch.from_numpy(index)].masked_scatter(
            mask.expand(b, q, -1), (zt * s_t).reshape(-1)
        )
        values = acqf(X)
        finite = torch.isfinite(values)
        (grad,) = torch.autograd.grad(torch.where(finite, values, 0.0).sum(), zt)
        loss = np.where(finite.numpy(), -values.detach().numpy(), _BAD_LOSS)
        return loss, -np.nan_to_num(grad.numpy(), nan=0.0, posinf=0.0, neginf=0.0)

    z0 = (X0[:, :, cont] / scales[cont]).reshape(k, -1)
    bounds = np.stack([np.zeros_like(s), 1.0 / s], axis=-1)
    z_opt = batched_lbfgsb(loss_and_grad, z0, bounds, max_iter=max_iter)
    X = X0.copy()
    X[:, :, cont] = np.clip(z_opt.reshape(k, q, -1) * scales[cont], 0.0, 1.0)
    return X


def _coordinate_sweep(
    acqf: AcqFunc, X: np.ndarray, values: np.ndarray, search_space: SearchSpace
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each start, try every admissible value of each discrete dim; keep improvements.

    Returns the new starts (k, q, d), their values (k,) and which starts changed (k,).
    """
    k, q, d = X.shape
    X = X.copy()
    changed = np.zeros(k, dtype=bool)
    for i in range(q):
        for j in np.flatnonzero(search_space.is_discrete):
            grid = search_space.grid_values(j)
            if len(grid) < 2:
                continue
            trial = np.repeat(X[:, None], len(grid), axis=1)  # (k, g, q, d)
            trial[:, :, i, j] = grid[None, :]
            trial_values = _evaluate(acqf, trial.reshape(-1, q, d)).reshape(k, -1)
            best = trial_values.argmax(1)
            best_values = trial_values[np.arange(k), best]
            improve = (best_values > values) & (grid[best] != X[:, i, j])
            X[improve, i, j] = grid[best[improve]]
            values = np.where(improve, best_values, values)
            changed |= improve
    return X, values, changed


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
    max_iter: int = 50,
    scales: np.ndarray | None = None,  # (d,)
) -> tuple[np.ndarray, float]:
    """Return the best candidate set found, shape (q, d) (rounded, valid), and its value.

    Args:
        acqf: Batched acquisition (b, q, d) -> (b,), differentiable in X, rows independent.
        search_space: The encoded space (for sampling, rounding and discrete dims).
        rng: Source of randomness (the result is deterministic given its state).
        q: Number of points chosen jointly. Defaults to 1.
        n_preliminary_samples: Number of quasi-random candidate sets evaluated first.
            Defaults to 1024.
        n_local_search: Number of best candidates refined locally. Defaults to 10.
        warm_starts: Extra candidate sets (k, q, d) to consider, e.g. the best observed point.
            Defaults to None.
        exclude: Points (m, d) that must not be returned (e.g. pending or evaluated ones); when
            every candidate is excluded the best one is returned anyway. Defaults to None.
        max_iter: L-BFGS-B iteration cap per local search. Defaults to 50.
        scales: Per-dimension scales of the acquisition's variation (e.g. the objective GP's
            lengthscales, ``inverse_squared_lengthscales ** -0.5``) used to precondition the
            local search. Defaults to None (all 1).
    """
    d = search_space.dim
    if q < 1:
        raise ValueError(f"`q` must be >= 1, but got q={q}.")
    if n_preliminary_samples < 1:
        raise ValueError(
            f"`n_preliminary_samples` must be >= 1, but got "
            f"n_preliminary_samples={n_preliminary_samples}."
        )
    if n_local_search < 1:
        raise ValueError(
            f"`n_local_search` must be >= 1, but got n_local_search={n_local_search}."
        )
    if scales is None:
        scales = np.ones(d)
    scales = np.asarray(scales, dtype=float)
    if scales.shape != (d,) or not np.all(np.isfinite(scales)) or not np.all(scales > 0):
        raise ValueError(
            f"`scales` must be a positive finite array of shape ({d},), but got scales={scales!r}."
        )
    with single_threaded_torch():
        X = search_space.sample(n_preliminary_samples * q, rng)
        X = X.reshape(n_preliminary_samples, q, d)
        if warm_starts is not None and len(warm_starts):
            X = np.concatenate([search_space.round(np.asarray(warm_starts).reshape(-1, q, d)), X])
        values = _evaluate(acqf, X)
        is_excluded = _excluded(X, exclude)
        ranked = np.argsort(-np.where(is_excluded, -np.inf, values), kind="stable")
        starts = X[ranked[:n_local_search]].copy()
        start_values = values[ranked[:n_local_search]]

        cont = ~search_space.is_discrete
        todo = np.ones(len(starts), dtype=bool)
        for _ in range(_MAX_ALTERNATIONS):
            if cont.any():
                refined = search_space.round(
                    _local_continuous(acqf, starts[todo], cont, scales, max_iter)
                )
                refined_values = _evaluate(acqf, refined)
                better = refined_values > start_values[todo]
                idx = np.flatnonzero(todo)[better]
                starts[idx] = refined[better]
                start_values[idx] = refined_values[better]
            if not search_space.is_discrete.any():
                break
            starts, start_values, todo = _coordinate_sweep(
                acqf, starts, start_values, search_space
            )
            if not (todo.any() and cont.any()):
                break

        final = np.concatenate([starts, X[ranked[:1]]])
        final_values = np.concatenate([start_values, values[ranked[:1]]])
        penalized = np.where(_excluded(final, exclude), -np.inf, final_values)
        best = int(np.argmax(penalized if np.isfinite(penalized).any() else final_values))
    return final[best], float(final_values[best])
