"""The examples run (with tiny settings) and do what they say."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import optuna
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_fairbo_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    study = _load("fairbo_quickstart").main(n_trials=7, n_rows=1500)
    out = capsys.readouterr().out
    assert len(study.trials) == 7
    best = study.best_trial
    assert best.user_attrs["fairtune:demographic_parity"] <= 0.05
    assert best.constraints["demographic_parity"] <= 0
    assert f"#{best.number}" in out and "demographic parity difference" in out
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def test_collaborative_tenants(capsys: pytest.CaptureFixture[str]) -> None:
    result = _load("collaborative_tenants").main(rounds=3)
    out = capsys.readouterr().out
    assert result["n_trials"] == 9
    assert set(result["utilities"]) == {"alpha", "beta", "gamma"}
    assert result["inequality"] >= 0
    assert "inequality" in out and "alpha" in out


def test_mtkb_tradeoff(capsys: pytest.CaptureFixture[str]) -> None:
    result = _load("mtkb_tradeoff").main(n_trials=8, n_rows=1500)
    out = capsys.readouterr().out
    study = result["study"]
    assert len(study.trials) == 8
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert f"#{result['best'].number}" in out and "Learned task correlation" in out
    assert result["correlation"].shape == (2, 2)
    assert result["best"] in study.trials
