"""The setup of a search: every argument that changes what a trial's score means, stored once.

A study's trials are comparable only when they were scored the same way: on the same rows,
labels, groups and validation splits, with the same model space or pipeline, metric, limits,
margin, mitigation, budgets, pruner, tenants and validation scheme. Each entrance
(:class:`~fairtune.tuning.FairObjective`, :class:`~fairtune.tuning.FairSearchCV`, the command
line for one team or many) builds one record of these (:func:`setup_record`); the first trial
stores it with the study under one key (:data:`fairtune._keys.SETUP_KEY`, a tenant's under
``"fairtune:setup:<tenant>"``), and every later run compares its own record with the stored one
(:func:`check_setup`): one message names each differing argument in the caller's spelling
(``margin=0.01`` in Python, ``--margin 0.01`` on the command line).

Entries a stored record does not have (a study stored by an older version) are taken from the
run and are not differences. The tenants of a shared study are a fact of the study, not of one
tenant: they are compared for every tenant that joins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fairtune._keys import (
    DATA_KEY,
    DATASET_KEY,
    LIMITS_KEY,
    METRIC_KEY,
    MITIGATION_SETUP_KEY,
    MODEL_KEY,
    OBJECTIVES_KEY,
    SETUP_KEY,
    TENANT_SETUP_PREFIX,
    VALIDATION_KEY,
)
from fairtune._names import arg, has_name

if TYPE_CHECKING:
    import optuna

__all__ = ["check_directions", "check_setup", "describe_pruner", "read_setup", "setup_record"]

# The record's entries, in the order messages and reports list them; each is the Python
# argument that sets it (the command line renames them to its flags through fairtune._names).
FIELDS: tuple[str, ...] = (
    "entrance", "dataset", "pos_label", "model", "metric", "objectives", "limits", "margin",
    "mitigation", "validation", "budgets", "resource", "pruner", "prune_unfair", "tenants",
    "confidence", "safety_size", "data",
)
# Entries shared by every tenant of a study (stored in the study's own record): the tenants,
# and what the sampler proposes for all of them, the model space and the mitigation's settings.
_SHARED: tuple[str, ...] = ("tenants", "model", "mitigation")
# What each entry is, for messages: the arguments that choose it.
_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "dataset": ("dataset", "use_sensitive_feature", "drop_columns"),
    "validation": ("cv", "validation_size", "test_size", "random_state"),
    "model": ("model",),
}
# The keys older versions stored one entry each under.
_LEGACY: dict[str, str] = {
    DATASET_KEY: "dataset", MODEL_KEY: "model", METRIC_KEY: "metric", LIMITS_KEY: "limits",
    VALIDATION_KEY: "validation", MITIGATION_SETUP_KEY: "mitigation",
    OBJECTIVES_KEY: "objectives", DATA_KEY: "data",
}


def setup_record(**entries: Any) -> dict[str, Any]:
    """A setup record of the given entries (names of :data:`FIELDS`), in JSON-friendly form."""
    unknown = sorted(set(entries) - set(FIELDS))
    if unknown:
        raise TypeError(f"unknown setup entries {unknown}; the entries are {list(FIELDS)}")
    return {name: _plain(entries[name]) for name in FIELDS if name in entries}


def _plain(value: Any) -> Any:
    """Tuples as lists, numpy scalars as Python ones: what a storage gives back."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def describe_pruner(pruner: Any) -> str | None:
    """What a pruner does to a trial's steps, as the setup records it: None when it prunes
    nothing (``NopPruner``, or Optuna's default without budgets to prune at: see
    :func:`is_default_pruner`), else its class and settings, e.g.
    ``"SuccessiveHalvingPruner(min_early_stopping_rate=0, min_resource=1, reduction_factor=3)"``."""
    if is_default_pruner(pruner):
        return None
    return _described(pruner)


def _described(pruner: Any) -> str:
    settings = []
    for key, value in sorted(vars(pruner).items()):
        if isinstance(value, (bool, int, float, str)) or value is None:
            if isinstance(value, float) and math.isnan(value):
                value = "nan"
            settings.append(f"{key.lstrip('_')}={value!r}")
    return f"{type(pruner).__name__}({', '.join(settings)})"


def is_default_pruner(pruner: Any) -> bool:
    """Whether ``pruner`` is what ``optuna.create_study`` gives when it is given none: a
    ``MedianPruner`` with its default settings (or no pruner at all)."""
    import optuna

    if pruner is None or isinstance(pruner, optuna.pruners.NopPruner):
        return True
    return type(pruner) is optuna.pruners.MedianPruner and not hasattr(
        pruner, "_fairtune_pruner") and (
        _described(pruner) == _described(optuna.pruners.MedianPruner()))


def read_setup(study: optuna.Study, tenant: str | None = None) -> dict[str, Any]:
    """The setup record stored with ``study`` (a tenant's with ``tenant``, with the study's
    shared entries), ``{}`` when none is stored; a study stored by an older version (one key
    per entry) is read into the same form."""
    attrs = study.user_attrs
    shared = dict(attrs.get(SETUP_KEY) or {})
    if not shared:
        shared = {name: attrs[key] for key, name in _LEGACY.items() if key in attrs}
    if tenant is None:
        return shared
    own = dict(attrs.get(TENANT_SETUP_PREFIX + tenant) or {})
    if own and not any(name in own for name in FIELDS):  # an older tenant record
        own = {name: own[key] for key, name in _LEGACY.items() if key in own}
    return {**own, **{name: shared[name] for name in _SHARED if name in shared}}


def differences(stored: Mapping[str, Any], record: Mapping[str, Any]) -> list[str]:
    """The entries of ``record`` that ``stored`` holds with another value."""
    return [name for name in FIELDS
            if name in stored and name in record and _plain(stored[name]) != record[name]]


def _show(value: Any) -> str:
    if isinstance(value, list):
        return repr(", ".join(f"{v:.12g}" if isinstance(v, float) else str(v) for v in value)
                    or "none")
    return "none" if value is None else repr(value)


def setup_message(study: optuna.Study, stored: Mapping[str, Any], record: Mapping[str, Any],
                  names: list[str], tenant: str | None = None,
                  arguments: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """Why ``study`` cannot take this run's trials: each differing entry, named by the
    arguments that choose it, with the stored value and this run's; only the data when
    nothing else differs (other settings explain other data)."""
    named = [n for n in names if n != "data"]
    whose = f" (tenant {tenant!r})" if tenant is not None else ""
    if not named:
        return (
            f"{arg('study')} {study.study_name!r}{whose} holds trials scored on other data (data "
            f"fingerprint {stored.get('data')!r} there, {record.get('data')!r} here: other rows, "
            "labels, groups or validation splits), so its best trial would be chosen on scores "
            "that do not measure these rows; create a new study for this data (another "
            f"{arg('study_name')})."
        )

    def argument(name: str) -> str:
        chosen = {**_ARGUMENTS, **(arguments or {})}.get(name, (name,))
        spelled = [arg(a) for a in chosen if has_name(a)] or [arg(name)]
        if name == "dataset" and len(spelled) > 1:  # the data, and what the model sees of it
            return f"{spelled[0]} (and {', '.join(spelled[1:])})"
        return spelled[0] if len(spelled) == 1 else (
            f"{', '.join(spelled[:-1])} and {spelled[-1]}")

    def note(name: str) -> str:
        if name != "limits":
            return ""
        if stored.get("confidence") or record.get("confidence"):
            return (f" (the limits the trials are validated against: {arg('limits')} less "
                    f"{arg('margin')} and the width of the {arg('confidence')} bound)")
        return (f" (the limits the trials are validated against: {arg('limits')} less "
                f"{arg('margin')})")

    what = "; ".join(f"{argument(n)} {_show(stored[n])}, but this run asks for "
                     f"{_show(record[n])}{note(n)}" for n in named)
    return (
        f"{arg('study')} {study.study_name!r}{whose} was tuned with {what}: its trials were "
        "scored another way and are not comparable with this run's; use the same "
        f"{' and '.join(argument(n) for n in named)} as before, or another "
        f"{arg('study_name')}."
    )


def check_setup(study: optuna.Study, record: Mapping[str, Any], *,
                tenant: str | None = None,
                arguments: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """Compare ``record`` with the setup ``study`` stores, then store what it lacks.

    The one comparison of every entrance and every resume: entries that differ raise one
    ValueError naming them (:func:`setup_message`, with ``arguments`` naming the entrance's
    own arguments for an entry, e.g. ``{"model": ("estimator", "param_distributions")}``);
    entries not stored yet are stored (the shared ones in the study's record, a tenant's own
    under its key).

    Raises:
        ValueError: If ``study`` holds trials scored with another setup.
    """
    record = {name: _plain(value) for name, value in record.items()}
    stored = read_setup(study, tenant)
    names = differences(stored, record)
    if names:
        raise ValueError(setup_message(study, stored, record, names, tenant, arguments))
    shared = dict(study.user_attrs.get(SETUP_KEY) or {})
    if tenant is None:
        if set(record) - set(shared):
            study.set_user_attr(SETUP_KEY, {**record, **shared})
        return
    new_shared = {n: record[n] for n in _SHARED if n in record and n not in shared}
    if new_shared:
        study.set_user_attr(SETUP_KEY, {**shared, **new_shared})
    own = dict(study.user_attrs.get(TENANT_SETUP_PREFIX + tenant) or {})
    mine = {n: v for n, v in record.items() if n not in _SHARED}
    if set(mine) - set(own):
        study.set_user_attr(TENANT_SETUP_PREFIX + tenant, {**mine, **own})


def check_directions(study: optuna.Study, directions: list[str], *, objectives: list[str],
                     metric: str) -> None:
    """Refuse a study whose directions do not fit the objective's: one maximized metric, or
    the multi-objective form's ``directions``."""
    from optuna.study import StudyDirection

    if objectives:
        expected = [StudyDirection.MAXIMIZE if d == "maximize" else StudyDirection.MINIMIZE
                    for d in directions]
        if list(study.directions) != expected:
            raise ValueError(
                f"`study` must have directions={directions} for the objectives {objectives}, "
                f"but got directions={[d.name.lower() for d in study.directions]}; create the "
                "study with directions=objective.directions."
            )
    elif len(study.directions) != 1 or study.direction != StudyDirection.MAXIMIZE:
        raise ValueError(
            f"`study` must maximize one value: FairObjective returns its {metric}, to be "
            f"maximized, but got directions={[d.name for d in study.directions]}; create the "
            "study with direction='maximize'."
        )


def in_study(record: Mapping[str, Any], study: optuna.Study, pruner: Any) -> dict[str, Any]:
    """An objective's record with what the study adds: its pruner and its sampler's tenants."""
    tenants = getattr(study.sampler, "tenants", None)
    return {**record, "pruner": describe_pruner(pruner),
            "tenants": None if tenants is None else list(tenants)}


def validation_text(cv: int | None, validation_size: float | None, test_size: float | None,
                    random_state: int) -> str:
    """The validation scheme as a FairObjective's record states it."""
    scheme = (f"{cv}-fold cross-validation" if cv
              else f"a {validation_size:.0%} validation split")
    held_out = f", {test_size:g} held out for testing" if test_size else ""
    return f"{scheme}{held_out}, split seed {random_state}"
