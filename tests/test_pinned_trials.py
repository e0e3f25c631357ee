"""Short studies whose trial sequences (parameters and values) are pinned.

A refactor of the trial path, the samplers or the command line must keep what a study does: these
sequences were recorded from the library as it was, and a change that moves any parameter or value
beyond floating-point noise fails here. Every entrance has its pin: FairObjective (with a
sampler of one's own, with ``confidence`` and its certificate, with ``budgets`` and a pruner,
with tenants sharing a study), FairSearchCV (with and without ``confidence``) and
``fairtune tune`` (the README's first command, and ``--confidence`` on a CSV file); the newer
pins also hold each trial's fairness values and verdict and the certificate or refusal.
Regenerate them only for a change that is meant to alter the search, and say so in its commit:

    python -m tests.test_pinned_trials --write
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest

PINNED = Path(__file__).with_name("pinned_trials.json")
# Tolerances for values and float parameters: machines differ in the last digits of
# floating-point results; a changed search moves them by far more.
_REL, _ABS = 1e-6, 1e-9


def _trials(study: optuna.Study) -> list[dict[str, Any]]:
    return [
        {"params": dict(t.params), "values": list(t.values or []),
         "state": t.state.name}
        for t in study.trials
    ]


def fairbo_sequence() -> list[dict[str, Any]]:
    from fairtune.samplers import FairBOSampler
    from fairtune.tuning import FairObjective

    objective = FairObjective("german", "random_forest", limits="dsp<=0.05")
    study = optuna.create_study(direction="maximize",
                                sampler=FairBOSampler(seed=0, n_startup_trials=3))
    study.optimize(objective, n_trials=6)
    return _trials(study)


def mtkb_sequence() -> list[dict[str, Any]]:
    from fairtune.samplers import MTKBSampler
    from fairtune.tuning import FairObjective

    objective = FairObjective("german", "linear", objectives=["accuracy", "demographic_parity"])
    study = optuna.create_study(directions=objective.directions,
                                sampler=MTKBSampler(seed=0, n_startup_trials=3))
    study.optimize(objective, n_trials=6)
    return _trials(study)


def first_command_sequence(tmp_path: Path) -> list[dict[str, Any]]:
    """The README's first command (COMPAS, XGBoost with the threshold inside, DP <= 0.05,
    a test split), with 10 trials instead of 50: the untuned model and the random startup.
    Its GP-suggested trials that follow move in the fourth or fifth digit with the library
    versions (XGBoost's and NumPy's floating point), as a GP's argmax does on values that
    differ in the last digits; the GP path is pinned by the FairBOSampler sequence above."""
    from fairtune.cli import main

    storage = f"sqlite:///{tmp_path / 'first.db'}"
    code = main([
        "tune", "--dataset", "compas", "--model", "xgboost", "--limit",
        "demographic_parity<=0.05", "--mitigation", "threshold", "--n-trials", "10",
        "--test-size", "0.25", "--no-progress", "--storage", storage, "--study-name", "first",
    ])
    assert code == 0
    return _trials(optuna.load_study(study_name="first", storage=storage))


def _fair_trials(study: optuna.Study, metrics: tuple[str, ...] = ("demographic_parity",)
                 ) -> list[dict[str, Any]]:
    """:func:`_trials` with what the limits saw: each limited metric's value and the verdict
    (user attributes ``"fairtune:<metric>"``, ``"fairtune:fair"``), the intermediate values a
    pruner saw, and a shared study's tenant."""
    from fairtune.tenancy import tenant_of

    rows = _trials(study)
    for row, t in zip(rows, study.trials):
        row["fairness"] = {m: t.user_attrs.get(f"fairtune:{m}") for m in metrics}
        row["fair"] = t.user_attrs.get("fairtune:fair")
        row["intermediate"] = [[step, value] for step, value
                               in sorted(t.intermediate_values.items())]
        row["tenant"] = tenant_of(t)
    return rows


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays as the JSON types they hold."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return value


def _refusal(error: Exception) -> dict[str, str]:
    """A refusal as pinned: its class and the start of its message."""
    return {"refused": type(error).__name__, "message": str(error)[:60]}


def _table(n: int = 20000, seed: int = 0) -> tuple[Any, Any, Any]:
    """A synthetic (X, y, sensitive) table: three numeric columns, two groups "a" and "b",
    labels from a logistic model in which group b is favoured (through the group and x3,
    shifted for b), so that the most accurate models break demographic_parity<=0.05 on
    validation. 20,000 rows: a 95% certificate of a 0.1 limit needs thousands of safety rows,
    which German credit lacks (it refuses before any trial)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    group = rng.integers(0, 2, n)
    X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                      "x3": rng.normal(size=n) + 0.5 * group})
    logit = 1.2 * X["x1"] - 0.8 * X["x2"] + 0.5 * X["x3"] + 0.5 * group
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return X, pd.Series(y, name="y"), pd.Series(np.where(group == 1, "b", "a"), name="group")


def confidence_sequence() -> dict[str, Any]:
    """FairObjective with ``confidence=0.95`` on the synthetic table (linear model,
    demographic_parity<=0.1, a 20% test split): its study from ``create_study(seed=0)`` (the
    untuned model first, FairBOSampler), 8 trials validated against the limit tightened by the
    safety rows' bound width, then the safety test of ``refit_best`` (the certificate) and the
    certified model's ``evaluate`` scores on the test split."""
    from fairtune.tuning import FairObjective

    objective = FairObjective(_table(), "linear", limits="demographic_parity<=0.1",
                              test_size=0.2, confidence=0.95)
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=8)
    out: dict[str, Any] = {"tuning_limits": [str(limit) for limit in objective.tuning_limits],
                           "trials": _fair_trials(study)}
    try:
        pipeline = objective.refit_best(study)
    except ValueError as error:  # NotCertifiedError is a ValueError
        out["certificate"] = _refusal(error)
    else:
        out["certificate"] = _plain(pipeline.certificate_.as_dict())
        out["evaluate"] = _plain(objective.evaluate(pipeline))
    return out


def budgets_sequence() -> dict[str, Any]:
    """FairObjective with ``budgets=(1/9, 1/3, 1)`` (multi-fidelity on the training rows) and
    the successive-halving pruner of ``create_study(pruner=...)``, on the synthetic table
    (linear model, demographic_parity<=0.055): 12 trials, their states (pruned or complete),
    the metric and gap each reported at the smaller budgets, and the best fair trial."""
    from fairtune.fairness import best_fair_trial
    from fairtune.tuning import FairObjective

    objective = FairObjective(_table(), "linear", limits="demographic_parity<=0.055",
                              budgets=(1 / 9, 1 / 3, 1.0))
    study = objective.create_study(seed=0, pruner="successive_halving")
    study.optimize(objective, n_trials=12)
    out: dict[str, Any] = {"trials": _fair_trials(study),
                           "rungs": [t.user_attrs.get("fairtune:rungs") for t in study.trials]}
    try:
        out["best_fair"] = best_fair_trial(study).number
    except ValueError as error:
        out["best_fair"] = _refusal(error)
    return out


def tenants_sequence() -> dict[str, Any]:
    """Two tenants sharing a study (CollaborativeUCBSampler, rho=0.5, 2 random startup rounds,
    seed 0), each with a FairObjective of its own data (``tenant=``; the synthetic table from
    seeds 0 and 1, linear model, demographic_parity<=0.06), run in turns by
    ``fairtune.tenancy.optimize`` for 5 rounds: the trials with their tenants, the cumulative
    utilities, and each tenant's best fair trial among its own (what its ``refit_best``
    refits). The sampler ignores the constraints (it warns so)."""
    from fairtune import tenancy
    from fairtune.fairness import best_fair_trial
    from fairtune.samplers import CollaborativeUCBSampler
    from fairtune.tuning import FairObjective

    tenants = ["alpha", "beta"]
    objectives = {name: FairObjective(_table(seed=seed), "linear",
                                      limits="demographic_parity<=0.06", tenant=name)
                  for seed, name in enumerate(tenants)}
    study = optuna.create_study(direction="maximize", sampler=CollaborativeUCBSampler(
        tenants=tenants, rho=0.5, n_startup_rounds=2, seed=0))
    for _ in range(5):
        for name in tenants:
            tenancy.optimize(study, name, objectives[name], n_trials=1)
    best = {}
    for name in tenants:
        try:
            best[name] = best_fair_trial(study, tenant=name).number
        except ValueError as error:
            best[name] = _refusal(error)
    return {"trials": _fair_trials(study),
            "utilities": tenancy.cumulative_utilities(study, tenants), "best_fair": best}


def _search_result(search: Any) -> dict[str, Any]:
    results = search.cv_results_
    out = {"params": _plain(list(results["params"])),
           "mean_test_score": _plain(results["mean_test_score"]),
           "demographic_parity": _plain(results["demographic_parity"]),
           "fair": _plain(results["fair"]),
           "trial_number": _plain(results["trial_number"]),
           "best_index": int(search.best_index_), "best_params": _plain(search.best_params_)}
    certificate = getattr(search.best_estimator_, "certificate_", None)
    if certificate is not None:
        out["certificate"] = _plain(certificate.as_dict())
    return out


def search_sequence() -> dict[str, Any]:
    """FairSearchCV on a scikit-learn pipeline (StandardScaler, LogisticRegression; C on a log
    scale), demographic_parity<=0.05, 3 folds, 6 trials, random_state=0, on German credit
    (its one-hot columns, the groups of ``sex``): ``cv_results_`` per trial (params, the
    pooled out-of-fold score and gap, the verdict) and the best fair trial."""
    import pandas as pd
    from optuna.distributions import FloatDistribution
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from fairtune.datasets import load_german
    from fairtune.tuning import FairSearchCV

    X, y, sex = load_german(return_X_y=True)
    X = pd.get_dummies(X, dtype=float)
    search = FairSearchCV(
        make_pipeline(StandardScaler(), LogisticRegression()),
        {"logisticregression__C": FloatDistribution(1e-4, 1e2, log=True)},
        limits="demographic_parity<=0.05", cv=3, n_trials=6, random_state=0)
    try:
        search.fit(X, y, sensitive_features=sex)
    except ValueError as error:
        return _refusal(error)
    return _search_result(search)


def search_confidence_sequence() -> dict[str, Any]:
    """FairSearchCV with ``confidence=0.95`` on the synthetic table (StandardScaler,
    LogisticRegression; C on a log scale), demographic_parity<=0.1, 3 folds, 5 trials,
    random_state=0: ``cv_results_`` per trial, the best fair trial and the certificate of the
    refitted ``best_estimator_`` (or the refusal)."""
    from optuna.distributions import FloatDistribution
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from fairtune.tuning import FairSearchCV

    X, y, group = _table()
    search = FairSearchCV(
        make_pipeline(StandardScaler(), LogisticRegression()),
        {"logisticregression__C": FloatDistribution(1e-4, 1e2, log=True)},
        limits="demographic_parity<=0.1", cv=3, n_trials=5, random_state=0, confidence=0.95)
    try:
        search.fit(X, y, sensitive_features=group)
    except ValueError as error:
        return _refusal(error)
    return _search_result(search)


def cli_confidence_sequence(tmp_path: Path) -> dict[str, Any]:
    """``fairtune tune --data FILE --target y --sensitive group --model linear --limit
    demographic_parity<=0.1 --confidence 0.95 --n-trials 6`` on the synthetic table written as
    a CSV (six decimals, so the file is the same under any pandas): the exit code, the trial
    sequence in its --storage file and the certificate the study stores."""
    from fairtune.cli import main

    X, y, group = _table()
    data = X.assign(group=group, y=y)
    data.to_csv(tmp_path / "table.csv", index=False, float_format="%.6f")
    storage = f"sqlite:///{tmp_path / 'confidence.db'}"
    code = main([
        "tune", "--data", str(tmp_path / "table.csv"), "--target", "y", "--sensitive", "group",
        "--model", "linear", "--limit", "demographic_parity<=0.1", "--confidence", "0.95",
        "--n-trials", "6", "--no-progress", "--storage", storage, "--study-name", "certified",
    ])
    study = optuna.load_study(study_name="certified", storage=storage)
    return {"exit_code": code, "trials": _fair_trials(study),
            "certificate": _plain(study.user_attrs.get("fairtune:certificate"))}


def _same(pinned: Any, got: Any, where: str) -> None:
    if isinstance(pinned, float) or isinstance(got, float):
        assert got == pytest.approx(pinned, rel=_REL, abs=_ABS), where
    elif isinstance(pinned, dict):
        assert sorted(got) == sorted(pinned), where
        for key in pinned:
            _same(pinned[key], got[key], f"{where}.{key}")
    elif isinstance(pinned, list):
        assert len(got) == len(pinned), where
        for i, (p, g) in enumerate(zip(pinned, got)):
            _same(p, g, f"{where}[{i}]")
    else:
        assert got == pinned, where


# Each pin's name in pinned_trials.json, and how to run it (in a folder of its own).
SEQUENCES: dict[str, Callable[[Path], Any]] = {
    "fairbo": lambda folder: fairbo_sequence(),
    "mtkb": lambda folder: mtkb_sequence(),
    "first_command": first_command_sequence,
    "confidence": lambda folder: confidence_sequence(),
    "budgets": lambda folder: budgets_sequence(),
    "tenants": lambda folder: tenants_sequence(),
    "search": lambda folder: search_sequence(),
    "search_confidence": lambda folder: search_confidence_sequence(),
    "cli_confidence": cli_confidence_sequence,
}


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_the_trial_sequence_is_the_pinned_one(name: str, tmp_path: Path) -> None:
    pinned = json.loads(PINNED.read_text())[name]
    got = SEQUENCES[name](tmp_path)
    # JSON round trip: the stored form of what the study holds.
    _same(pinned, json.loads(json.dumps(got)), name)


def _write() -> None:
    import tempfile

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sequences = {}
    for name, sequence in SEQUENCES.items():
        with tempfile.TemporaryDirectory() as folder:
            sequences[name] = sequence(Path(folder))
    PINNED.write_text(json.dumps(sequences, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINNED}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.test_pinned_trials --write")
    _write()
