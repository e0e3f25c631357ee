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


def test_femnist_tenants_on_the_embedded_digits(capsys: pytest.CaptureFixture[str]) -> None:
    result = _load("femnist_tenants").main(rounds=2, epochs=1)
    out = capsys.readouterr().out
    assert "NOT split by writer" in out  # the stand-in says what it is
    assert result["kind"] == "digits" and result["n_trials"] == 20
    assert sorted(result["utilities"]) == [f"t{i}" for i in range(10)]
    # Two rounds of accuracies in [0, 1] per tenant.
    assert all(0.0 <= u <= 2.0 for u in result["utilities"].values())
    assert all(0.0 <= b <= 1.0 for b in result["best"].values())
    assert result["inequality"] >= 0 and "inequality" in out


def test_femnist_tenants_reads_femnist_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import numpy as np

    # A LEAF shard of 100 writers with 3 images each (the example needs 10 x 10 writers).
    rng = np.random.RandomState(0)
    (tmp_path / "femnist" / "train").mkdir(parents=True)
    shard = {"users": [], "num_samples": [], "user_data": {}}
    for i in range(100):
        writer = f"f{i:04d}"
        shard["users"].append(writer)
        shard["num_samples"].append(3)
        shard["user_data"][writer] = {"x": rng.rand(3, 784).round(3).tolist(),
                                      "y": rng.randint(0, 62, 3).tolist()}
    (tmp_path / "femnist" / "train" / "shard.json").write_text(json.dumps(shard))
    result = _load("femnist_tenants").main(rounds=1, epochs=1, data_home=str(tmp_path))
    out = capsys.readouterr().out
    assert result["kind"] == "femnist" and result["n_trials"] == 10
    assert "FEMNIST (LEAF" in out and "100 writers" in out and "NOT split" not in out


@pytest.mark.processes
def test_cgp_agents_share_only_designs_on_their_board(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from fairtune.collaboration import AGENT_KEY_PREFIX, POST_KEY_PREFIX, SEED_KEY, Board

    module = _load("cgp_agents")
    agents = ["adult-east", "compas"]  # two of the four processes keep the test short
    results = module.main(n_trials=4, n_startup=2, n_rows=400, folder=str(tmp_path),
                          agents=agents)
    out = capsys.readouterr().out
    assert set(results) == set(agents)
    assert all(0.0 < v <= 1.0 for best in results.values() for v in best.values())
    assert "together" in out and "alone" in out and "compas" in out and "german" not in out
    # The run had four processes with four studies: inspect every key and value of the board.
    observed: set[float] = set()
    for agent in agents:
        study = optuna.load_study(study_name=agent,
                                  storage=f"sqlite:///{tmp_path / f'{agent}-together.db'}")
        assert len(study.trials) == 4
        observed |= {t.value for t in study.trials}
    board = Board(f"sqlite:///{tmp_path / 'board.db'}", name="agents")
    posts = 0
    for key, value in board.items().items():
        assert key == SEED_KEY or key.startswith((AGENT_KEY_PREFIX, POST_KEY_PREFIX)), key
        if key.startswith(POST_KEY_PREFIX):
            record = json.loads(value)
            assert set(record) == {"design", "lcb", "kappa"}
            assert set(record["design"]) == {"learning_rate", "max_leaf_nodes",
                                             "min_samples_leaf", "l2_regularization"}
            assert not observed & {*record["design"].values(), record["lcb"], record["kappa"]}
            posts += 1
    assert posts == 2 * 2  # rounds 2 and 3 of every agent


def test_fair_mitigation(capsys: pytest.CaptureFixture[str]) -> None:
    results = _load("fair_mitigation").main(n_trials=4)
    out = capsys.readouterr().out
    assert set(results) == {"hyperparameters only", "threshold"}
    threshold = results["threshold"]
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in threshold["study"].trials)
    assert all("threshold_tolerance" in t.params for t in threshold["study"].trials)
    assert f"test accuracy {threshold['accuracy']:.4f}" in out
    low, high = threshold["intervals"]["demographic_parity"]
    assert low <= threshold["demographic_parity"] <= high
    assert f"; 95 % interval {low:.4f}-{high:.4f})" in out
    assert "sensitive feature at prediction: predict(X, sensitive_features=...)" in out
    with pytest.raises(ValueError, match="sensitive_features"):
        threshold["pipeline"].predict(threshold["objective"].X_test)


def test_searchcv(capsys: pytest.CaptureFixture[str]) -> None:
    result = _load("searchcv").main(n_trials=4, n_rows=1500)
    out = capsys.readouterr().out
    search, frame = result["search"], result["frame"]
    assert search.n_trials_ == 4 and len(frame) == 4
    assert list(frame["mean_test_score"]) == sorted(frame["mean_test_score"], reverse=True)
    assert (frame["fair"] == (frame["demographic_parity"] <= 0.05)).all()
    assert search.cv_results_["fair"][search.best_index_]
    assert f"trial #{search.best_trial_.number}, CV accuracy {search.best_score_:.4f}" in out
    assert (f"accuracy {result['test_accuracy']:.4f}, demographic parity "
            f"{result['test_gap']:.4f}") in out
