"""The thread budgets: the GP engine's numerics and the models' training, one thread inside by
default, the previous settings restored after."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import optuna
import pytest
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from threadpoolctl import threadpool_info

import fairtune
from fairtune import _threads as threads
from fairtune._gp.gp import fit_gp
from fairtune._gp.optim import maximize_acqf
from fairtune._gp.search_space import SearchSpace
from fairtune.samplers import CollaborativeUCBSampler, FairBOSampler
from fairtune.tuning import (
    FairObjective,
    limit_training_threads,
    set_training_threads,
    training_threads,
)
from fairtune.tuning.femnist import CNNClassifier

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(autouse=True)
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Start every test with 2 torch threads (CI sets OMP_NUM_THREADS=1, under which a limit of
    one thread could not be told from no limit), and restore what was set before."""
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)
    fairtune.set_num_threads(None)


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                     "FAIRTUNE_NUM_THREADS")


def _run_with_default_threads(code: str) -> None:
    """Run ``code`` in a process with no thread variable set, as users run (CI sets
    OMP_NUM_THREADS=1, under which OpenBLAS starts with one thread and cannot be limited to
    fewer, so a limit could not be told from none)."""
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARIABLES}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr


_BLAS = """
import threading
import numpy, scipy.linalg, torch
from threadpoolctl import threadpool_info, threadpool_limits
from fairtune import _threads as threads

def blas():
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

threadpool_limits(limits=2, user_api="blas")
torch.set_num_threads(2)
assert blas() == {2}, blas()
"""


def test_one_thread_inside_and_the_settings_restored_after() -> None:
    _run_with_default_threads(_BLAS + """
with threads.limit_threads(10):
    assert torch.get_num_threads() == 1 and blas() == {1}, blas()
    with threads.limit_threads(10):  # nested: the outer limit holds
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 1 and blas() == {1}
assert torch.get_num_threads() == 2 and blas() == {2}, blas()
try:
    with threads.limit_threads(10):
        1 / 0
except ZeroDivisionError:
    pass
assert torch.get_num_threads() == 2 and blas() == {2}, blas()
""")


def test_threads_entering_and_leaving_in_turn_restore_everything() -> None:
    # Thread a enters, b enters, a leaves while b is inside, b leaves: each computes on one
    # torch thread, and all is restored. (What OpenBLAS reports in a thread other than the
    # one that set its count varies with its version: only the final state is checked.)
    _run_with_default_threads(_BLAS + """
steps = [threading.Event() for _ in range(3)]
seen = {"a": [], "b": []}

def a():
    with threads.limit_threads(10):
        seen["a"].append(torch.get_num_threads())
        steps[0].set()
        steps[1].wait(5)
    seen["a"].append(torch.get_num_threads())
    steps[2].set()

def b():
    steps[0].wait(5)
    with threads.limit_threads(10):
        seen["b"].append(torch.get_num_threads())
        steps[1].set()
        steps[2].wait(5)
        seen["b"].append(torch.get_num_threads())
    seen["b"].append(torch.get_num_threads())

workers = [threading.Thread(target=a), threading.Thread(target=b)]
for w in workers:
    w.start()
for w in workers:
    w.join(10)
assert seen == {"a": [1, 2], "b": [1, 1, 2]}, seen
assert threads._n_inside == 0 and torch.get_num_threads() == 2 and blas() == {2}, blas()
""")


def test_large_problems_keep_the_default_unless_the_user_sets_a_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with threads.limit_threads(threads.MANY_POINTS):
        assert torch.get_num_threads() == 2
        with threads.limit_threads(10):  # an inner small fit does not limit the outer decision
            assert torch.get_num_threads() == 2
    fairtune.set_num_threads(1)
    with threads.limit_threads(threads.MANY_POINTS):
        assert torch.get_num_threads() == 1
    fairtune.set_num_threads(None)
    monkeypatch.setenv(threads.ENV_VAR, "2")
    with threads.limit_threads(10):
        assert torch.get_num_threads() == 2
    monkeypatch.setenv(threads.ENV_VAR, "many")
    with pytest.raises(ValueError, match="FAIRTUNE_NUM_THREADS must be a positive integer"):
        threads.get_num_threads(10)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_set_num_threads_rejects_bad_counts(bad: object) -> None:
    with pytest.raises(ValueError, match=r"`n` must be a positive integer or None, but got n="):
        fairtune.set_num_threads(bad)  # type: ignore[arg-type]


def _count_threads_of_solves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record torch's thread count at every triangular solve (each GP's set-up makes some)."""
    counts: list[int] = []
    real = torch.linalg.solve_triangular

    def solve_triangular(*args: object, **kwargs: object) -> torch.Tensor:
        counts.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.linalg, "solve_triangular", solve_triangular)
    return counts


def test_engine_entry_points_run_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _count_threads_of_solves(monkeypatch)
    X = torch.rand(8, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    gp = fit_gp(X, X.sum(1), np.zeros(2, dtype=bool), max_iter=3)
    assert counts and set(counts) == {1}
    assert torch.get_num_threads() == 2
    ss = SearchSpace({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
    inside: list[int] = []

    def acqf(x: torch.Tensor) -> torch.Tensor:
        inside.append(torch.get_num_threads())
        return -(x[..., 0, 0] - 0.3) ** 2

    maximize_acqf(acqf, ss, rng=np.random.RandomState(0), n_preliminary_samples=8,
                  n_local_search=1)
    assert set(inside) == {1}
    assert gp is not None and torch.get_num_threads() == 2


@pytest.mark.parametrize("make", [
    lambda: FairBOSampler(seed=0, n_startup_trials=2),
    lambda: CollaborativeUCBSampler(tenants=["a", "b"], seed=0, n_startup_rounds=1),
])
def test_samplers_compute_on_one_thread_and_restore(
    make: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    sampler = make()  # type: ignore[operator]
    sampler._n_preliminary_samples = 16
    sampler._n_local_search = 1
    counts = _count_threads_of_solves(monkeypatch)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(lambda t: -(t.suggest_float("x", 0.0, 1.0) - 0.3) ** 2, n_trials=10)
    assert counts and set(counts) == {1}
    assert torch.get_num_threads() == 2


def test_set_num_threads_does_not_import_torch() -> None:
    code = (
        "import sys, fairtune; fairtune.set_num_threads(2); "
        "assert fairtune.get_num_threads(5) == 2; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)



def _pool_sizes() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info()}


class _Recorder(ClassifierMixin, BaseEstimator):
    """Records the thread pools' sizes and torch's thread count while it trains."""

    seen: list[tuple[set[int], int]] = []

    def fit(self, X, y):
        _Recorder.seen.append((_pool_sizes(), torch.get_num_threads()))
        self.classes_ = np.array([0, 1])
        return self

    def predict(self, X):
        return np.arange(len(X)) % 2


@pytest.fixture(autouse=True)
def _default_budget(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("FAIRTUNE_TRAINING_THREADS", raising=False)
    yield
    set_training_threads(None)


def test_models_train_on_the_budget_and_the_pools_are_restored() -> None:
    before, torch_before = _pool_sizes(), torch.get_num_threads()
    _Recorder.seen.clear()
    objective = FairObjective("german", lambda trial: _Recorder(), limits="dsp<=0.5")
    study = optuna.create_study(direction="maximize")
    study.optimize(objective, n_trials=1)
    pools, torch_threads = _Recorder.seen[0]
    assert pools == {1} and torch_threads == 1  # one thread by default
    assert _pool_sizes() == before and torch.get_num_threads() == torch_before
    set_training_threads(2)
    study.optimize(objective, n_trials=1)
    pools, torch_threads = _Recorder.seen[1]
    assert pools <= {1, 2} and 2 in pools | {torch_threads} and torch_threads == 2


def test_the_environment_variable_sets_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    assert training_threads() == 1
    monkeypatch.setenv("FAIRTUNE_TRAINING_THREADS", "3")
    assert training_threads() == 3
    with limit_training_threads() as n:
        assert n == 3 and torch.get_num_threads() == 3
    set_training_threads(2)  # the call wins over the environment
    assert training_threads() == 2
    monkeypatch.setenv("FAIRTUNE_TRAINING_THREADS", "many")
    set_training_threads(None)
    with pytest.raises(ValueError, match="FAIRTUNE_TRAINING_THREADS must be a positive integer, "
                                         "but got FAIRTUNE_TRAINING_THREADS='many'"):
        training_threads()
    with pytest.raises(ValueError, match=r"`n` must be a positive integer or None, but got n=0"):
        set_training_threads(0)


def test_the_cnn_trains_on_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_before = torch.get_num_threads()
    seen = []
    original = torch.optim.SGD.step

    def spy(self, *args, **kwargs):  # each optimizer step of the training loop
        seen.append(torch.get_num_threads())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.SGD, "step", spy)
    model = CNNClassifier(epochs=1, random_state=0)
    rng = np.random.default_rng(0)
    model.fit(rng.random((8, 8, 8)).astype(np.float32), np.arange(8) % 2)
    assert seen and set(seen) == {1} and torch.get_num_threads() == torch_before
