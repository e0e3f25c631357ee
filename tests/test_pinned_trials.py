"""Short studies whose trial sequences (parameters and values) are pinned.

A refactor of the trial path, the samplers or the command line must keep what a study does: these
sequences were recorded from the library as it was, and a change that moves any parameter or value
beyond floating-point noise fails here. Regenerate them only for a change that is meant to alter
the search, and say so in its commit:

    python -m tests.test_pinned_trials --write
"""

from __future__ import annotations

import json
import sys
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


@pytest.mark.parametrize("name", ["fairbo", "mtkb", "first_command"])
def test_the_trial_sequence_is_the_pinned_one(name: str, tmp_path: Path) -> None:
    pinned = json.loads(PINNED.read_text())[name]
    got = first_command_sequence(tmp_path) if name == "first_command" else (
        fairbo_sequence() if name == "fairbo" else mtkb_sequence()
    )
    # JSON round trip: the stored form of what the study holds.
    _same(pinned, json.loads(json.dumps(got)), name)


def _write() -> None:
    import tempfile

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as folder:
        sequences = {"fairbo": fairbo_sequence(), "mtkb": mtkb_sequence(),
                     "first_command": first_command_sequence(Path(folder))}
    PINNED.write_text(json.dumps(sequences, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINNED}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.test_pinned_trials --write")
    _write()
