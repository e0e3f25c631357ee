from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from fairtune.tenancy import (
    TENANT_KEY,
    ask,
    cumulative_utilities,
    finished_at_creation,
    tenant_of,
    trials_by_tenant,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_tenant_key() -> None:
    assert TENANT_KEY == "fairtune:tenant"


def test_ask_tags_the_trial_before_any_suggest() -> None:
    seen: list[str | None] = []

    class Spy(optuna.samplers.RandomSampler):
        def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
            # What a tenant-aware sampler sees at the first suggest.
            seen.append(study._storage.get_trial_user_attrs(trial._trial_id).get(TENANT_KEY))
            return {}

    study = optuna.create_study(sampler=Spy(seed=0))
    trial = ask(study, "alice")
    # Tagged in the storage from the moment the trial exists, as any other process sees it.
    stored = study.get_trials(deepcopy=False)[0]
    assert stored.state == TrialState.RUNNING
    assert stored.user_attrs == {TENANT_KEY: "alice"}
    assert stored.datetime_start is not None
    trial.suggest_float("x", 0, 1)
    assert seen == ["alice"]
    study.tell(trial, 1.0)
    assert study.trials[0].user_attrs[TENANT_KEY] == "alice"


def test_ask_records_which_trials_had_finished_at_creation() -> None:
    study = optuna.create_study()
    study.tell(study.ask(), 1.0)  # 0: complete
    running = study.ask()  # 1: running
    study.tell(study.ask(), state=TrialState.FAIL)  # 2: failed
    study.enqueue_trial({"x": 0.5})  # 3: waiting
    trial = ask(study, "alice")  # 4
    study.tell(running, 2.0)  # finishes after trial 4 was created
    study.tell(study.ask(), 3.0)  # pops and finishes the waiting trial 3
    later = ask(study, "bob")  # 5
    assert trial.number == 4
    finished = finished_at_creation(study.trials[trial.number])
    assert finished is not None
    assert [finished(t) for t in study.trials] == [True, False, True, False, False, False]
    finished_later = finished_at_creation(study.trials[later.number])
    assert [finished_later(t) for t in study.trials] == [True, True, True, True, False, False]
    assert finished_at_creation(study.trials[0]) is None  # not created by ask


def test_ask_with_fixed_distributions() -> None:
    study = optuna.create_study()
    trial = ask(study, "bob", fixed_distributions={"x": FloatDistribution(2.0, 3.0)})
    assert 2.0 <= trial.params["x"] <= 3.0
    assert tenant_of(trial) == "bob"


def test_ask_leaves_enqueued_trials_to_study_ask() -> None:
    study = optuna.create_study()
    study.enqueue_trial({"x": 0.5})
    trial = ask(study, "carol")
    assert trial.number == 1  # a new trial; the waiting one (number 0) is not taken
    assert study.trials[0].state == TrialState.WAITING
    assert study.ask().number == 0


def test_tenant_of_trial_and_frozen_trial() -> None:
    study = optuna.create_study()
    trial = ask(study, "alice")
    assert tenant_of(trial) == "alice"
    plain = study.ask()
    assert tenant_of(plain) is None
    # A tag set later (as a sampler does for untagged trials) is read from the storage.
    study._storage.set_trial_user_attr(plain._trial_id, TENANT_KEY, "bob")
    assert tenant_of(plain) == "bob"
    study.tell(trial, 1.0)
    study.tell(plain, 2.0)
    assert [tenant_of(t) for t in study.trials] == ["alice", "bob"]


def _study_with_history(direction: str) -> optuna.Study:
    study = optuna.create_study(direction=direction)
    for tenant, value in (("alice", 2.0), ("bob", 3.0), ("alice", 0.5), ("bob", None)):
        trial = ask(study, tenant)
        if value is None:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, value)
    study.tell(study.ask(), 100.0)  # untagged: belongs to nobody
    ask(study, "carol")  # still running
    return study


def test_trials_by_tenant() -> None:
    study = _study_with_history("maximize")
    complete = trials_by_tenant(study)
    assert {k: [t.number for t in v] for k, v in complete.items()} == {"alice": [0, 2], "bob": [1]}
    every = trials_by_tenant(study, states=None)
    assert {k: [t.number for t in v] for k, v in every.items()} == {
        "alice": [0, 2],
        "bob": [1, 3],
        "carol": [5],
    }
    failed = trials_by_tenant(study, states=(TrialState.FAIL,))
    assert list(failed) == ["bob"]


@pytest.mark.parametrize(("direction", "sign"), [("maximize", 1.0), ("minimize", -1.0)])
def test_cumulative_utilities_sum_complete_values_with_sign(direction: str, sign: float) -> None:
    study = _study_with_history(direction)
    # Failed, running and untagged trials count nothing; minimized values are negated.
    assert cumulative_utilities(study) == {"alice": sign * 2.5, "bob": sign * 3.0}
    assert cumulative_utilities(study, tenants=["carol", "alice"]) == {
        "carol": 0.0,
        "alice": sign * 2.5,
    }


def test_ask_rejects_bad_tenant() -> None:
    study = optuna.create_study()
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="`tenant` must be a non-empty string, but got"):
            ask(study, bad)  # type: ignore[arg-type]
    assert study.trials == []
