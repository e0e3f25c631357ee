"""benchmarks/searchcv_vs_grid.py runs end to end on tiny settings, resumes, summarizes, and
its GridSearchCV baseline scores every grid point on its pooled out-of-fold predictions."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tests._scripts import run_module

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TINY = ["--seeds", "2", "--n-rows", "500", "--test-rows", "500", "--cv", "2", "--values", "2"]


def _run(tmp_path: Path, *args: str) -> str:
    return run_module("benchmarks.searchcv_vs_grid", *args, cwd=tmp_path)


def test_runs_resumes_and_summarizes(tmp_path: Path) -> None:
    _run(tmp_path, "run", *TINY, "--out", "s.csv")
    with open(tmp_path / "s.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["seed"], r["method"]) for r in rows] == [
        (s, m) for s in ("0", "1") for m in ("grid", "fairsearchcv")
    ]
    for seed in ("0", "1"):
        grid, mine = (next(r for r in rows if r["seed"] == seed and r["method"] == m)
                      for m in ("grid", "fairsearchcv"))
        # The same budget: 2^3 grid points or trials, 2 folds each, and the refit.
        assert grid["n_candidates"] == mine["n_candidates"] == "8"
        assert grid["n_fits"] == mine["n_fits"] == str(8 * 2 + bool(grid["cv_score"]))
    for r in rows:
        if r["cv_score"]:
            assert float(r["cv_gap"]) <= 0.05 and 0.5 < float(r["cv_score"]) <= 1.0
            assert r["test_fair"] == str(int(float(r["test_gap"]) <= 0.05))
    assert _run(tmp_path, "run", *TINY, "--out", "s.csv") == ""  # every row is there

    summary = _run(tmp_path, "summarize", "s.csv", "--plot", "s.png")
    assert (tmp_path / "s.png").stat().st_size > 10_000
    table, _, comparisons = summary.partition("\n\n")
    assert "| GridSearchCV + a fairness filter | 2 |" in table
    assert "| FairSearchCV (FairBOSampler) | 2 |" in table
    assert "- best fair CV accuracy: " in comparisons and "(p = " in comparisons


def test_grid_baseline_pools_each_points_out_of_fold_predictions() -> None:
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold

    from fairtune.fairness import demographic_parity_difference

    module = importlib.import_module("benchmarks.searchcv_vs_grid")
    data = module.split(3, 500, 300)
    X, y, sex = data[:3]
    folds = StratifiedKFold(2, shuffle=True, random_state=3)
    points = module.grid(2)
    row = module.run_grid(3, data, folds, points)
    if not row.get("cv_score"):
        pytest.skip("no fair grid point on this tiny sample")
    params = json.loads(row["params"])
    pooled = np.empty(len(y), dtype=int)
    for train, test in folds.split(X, y):
        model = clone(module.pipeline(3)).set_params(**params)
        pooled[test] = model.fit(X.iloc[train], y.iloc[train]).predict(X.iloc[test])
    assert row["cv_score"] == pytest.approx(np.mean(pooled == y.to_numpy()), abs=1e-5)
    assert row["cv_gap"] == pytest.approx(
        demographic_parity_difference(y, pooled, sensitive_features=sex), abs=1e-5)
