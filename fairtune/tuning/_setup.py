"""The setup of a search: every argument that changes what a trial's score means, stored once.

A study's trials are comparable only when they were scored the same way: on the same rows,
labels, groups and validation splits, with the same model space or pipeline, metric, limits,
margin, mitigation, budgets, pruner, tenants and validation scheme. Each entrance
(:class:`~fairtune.tuning.FairObjective`, :class:`~fairtune.tuning.FairSearchCV`, the command
line for one team or many) builds one record of these (:func:`setup_record`); the first trial
stores it with the study under one key (:data:`fairtune._keys.SETUP_KEY`, a tenant's under
``"fairtune:setup:<tenant>"``), and every later run compares its own record with the stored one
(:func:`check_setup`): one message names each differing argument in the caller's spelling.
Entries a stored record lacks (an older version's) are not differences. ``limits_given``
holds the limits as given, ``limits`` those the trials are validated against (less
``margin`` and the width of the ``confidence`` bound); a difference in ``limits`` is named
through the choices behind it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
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
    TENANT_KEY,
    TENANT_SETUP_PREFIX,
    VALIDATION_KEY,
)
from fairtune._names import arg, got, has_name, renamed
from fairtune._optuna_compat import trial_id

if TYPE_CHECKING:
    import optuna

__all__ = ["SetupError", "check_directions", "check_setup", "check_stored", "check_tenant",
           "describe_pruner", "read_setup", "setup_record"]


class SetupError(ValueError):
    """A study's trials were scored with another setup (:func:`check_stored`): ``names`` the
    entries that differ, ``data_only`` whether only the data (rows, labels, groups) does."""

    def __init__(self, message: str, names: list[str]) -> None:
        super().__init__(message)
        self.names = list(names)
        self.data_only = all(name in _DATA for name in names)

# The record's entries, in the order messages list them, each named as the Python argument.
FIELDS: tuple[str, ...] = (
    "entrance", "dataset", "target", "pos_label", "model", "metric", "objectives",
    "limits_given", "limits", "margin", "mitigation", "validation", "budgets", "resource",
    "pruner", "prune_unfair", "tenants", "confidence", "safety_size", "bound", "data", "rows",
    "parts",
)
# Entries shared by every tenant of a study (what the sampler proposes for all of them).
_SHARED: tuple[str, ...] = ("tenants", "model", "mitigation")
# What each entry is, for messages: the arguments that choose it.
_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "validation": ("cv", "validation_size", "test_size", "random_state"),
    "model": ("model",), "limits_given": ("limits",),
}
# The choices the validated ``limits`` follow from.
_BEHIND_LIMITS: tuple[str, ...] = ("limits_given", "margin", "confidence", "safety_size", "bound",
                                   "data", "rows")
# The data entries: which rows the trials are scored on (named when nothing else differs).
_DATA: tuple[str, ...] = ("data", "rows")
# The parts of the ``rows`` entry, as messages describe them.
_ROWS: dict[str, str] = {
    "tuning": "the tuning rows (or their validation splits)",
    "test": "the held-out rows of the test split ({test_size})",
    "safety": "the held-out safety rows ({confidence})",
}
# The pruners of fairtune.tuning.PRUNER_NAMES by the class their records name.
_PRUNERS: dict[str, str] = {"MedianPruner": "median", "SuccessiveHalvingPruner":
                            "successive_halving", "HyperbandPruner": "hyperband"}
# Who stores each entrance's records, in words.
_ENTRANCES: dict[str, str] = {"FairObjective": "FairObjective (or `fairtune tune`)",
                              "FairSearchCV": "FairSearchCV"}
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
    """A pruner as the setup records it: None when it prunes nothing (:func:`is_default_pruner`),
    else its class and settings, e.g. ``"MedianPruner(n_startup_trials=5, ...)"``."""
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
    # ``parts`` structures the ``dataset`` and ``validation`` entries, compared as such.
    return [name for name in FIELDS if name != "parts" and name in stored and name in record
            and _compared(name, _plain(stored[name]), record[name])
            != _compared(name, record[name], stored[name])
            and not (name == "dataset" and _same_dataset(stored, record))]


def _same_dataset(stored: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Whether two ``dataset`` entries are the same data under another name or drop order:
    the same rows (``data``, ``rows``), sensitive features and columns dropped."""
    both = _parts(stored, record, "dataset")
    if both is None or any(stored.get(n) != record.get(n) or n not in stored
                           for n in ("data", "rows")):
        return False
    old, new = ({**side, "name": None, "dropped": sorted(side["dropped"])} for side in both)
    return old == new


def _compared(name: str, value: Any, other: Any) -> Any:
    """An entry as the comparison with ``other`` sees it: a ``pos_label`` of 1 or True scores
    as none does; of the ``rows`` digests, those both records hold (older versions stored
    fewer)."""
    if name == "pos_label" and str(value).strip().lower() in ("1", "1.0", "true"):
        return None
    if name == "rows" and isinstance(value, dict) and isinstance(other, dict):
        return {part: digest for part, digest in value.items() if part in other}
    return value


def _show(value: Any) -> str:
    if isinstance(value, list):
        return repr(", ".join(f"{v:.12g}" if isinstance(v, float) else str(v) for v in value)
                    or "none")
    return "none" if value is None else repr(value)


def _parts(stored: Mapping[str, Any], record: Mapping[str, Any], entry: str
           ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Both records' parts of ``entry``, or None when one lacks them (an older version's)."""
    old, new = ((side.get("parts") or {}).get(entry) for side in (stored, record))
    return (old, new) if isinstance(old, dict) and isinstance(new, dict) else None


def _items(stored: Mapping[str, Any], record: Mapping[str, Any], entry: str
           ) -> list[tuple[str, str, str]] | None:
    """``(argument, stored, this run's)`` for each part of the ``entry`` (``"dataset"`` or
    ``"validation"``) that differs, with the values as typed; None without the parts of both."""
    both = _parts(stored, record, entry)
    if both is None:
        return None
    old, new = both
    spelled: dict[str, tuple[str, Callable[[Any], Any]]]
    if entry == "validation":
        spelled = {n: (arg(n), _show) for n in ("cv", "validation_size", "test_size",
                                                "random_state")}
        # A change to or from folds is named as `cv`, not as `validation_size`.
        skip = "validation_size" if old["cv"] or new["cv"] else None
    else:
        # The command line names the sensitive features with a flag; Python with the data
        # (whose sensitive features are another data set's own).
        own = renamed() and has_name("sensitive")
        sensitive = arg("sensitive") if own else f"the sensitive features of {arg('dataset')}"
        said = {True: "'on'", False: "'off'"} if renamed() else {True: "False", False: "True"}
        spelled = {
            "name": (arg("dataset"), repr), "sensitive": (sensitive, repr),
            "hidden": (arg("use_sensitive_feature"), said.get),
            "dropped": (arg("drop_columns"), lambda v: repr(", ".join(v) or "none"))}
        skip = "sensitive" if not own and old["name"] != new["name"] else None
    return [(name, show(old[part]), show(new[part])) for part, (name, show) in spelled.items()
            if old[part] != new[part] and part != skip] or None


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _another_study(record: Mapping[str, Any]) -> str:
    """How this entrance starts a new study."""
    if record.get("entrance") == "FairSearchCV":
        return f"a new {arg('study')} or study=None"
    return f"another {arg('study_name')}"


def _data_message(which: str, stored: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """The rows differ and nothing else: which parts of them, as far as the records tell."""
    old, new = stored.get("rows") or {}, record.get("rows") or {}
    changed = [part for part in _ROWS if part in old and part in new and old[part] != new[part]]
    if changed and (changed != ["tuning"] or "data" not in stored):
        digests = "; ".join(f"{old[p]!r} there, {new[p]!r} here" for p in changed)
        parts = " and ".join(_ROWS[p].format(test_size=arg("test_size"),
                                             confidence=arg("confidence")) for p in changed)
        rows = (f"{parts} changed: a value, label or group differs, or the rows or columns "
                f"are in another order (digest {digests})")
    else:
        rows = (f"data fingerprint {stored.get('data')!r} there, {record.get('data')!r} here: "
                "other rows, labels, groups or validation splits")
    return (
        f"{which} holds trials scored on other data ({rows}), so its best trial would be "
        "chosen on scores that do not measure these rows; create a new study for this data "
        f"({_another_study(record)})."
    )


def setup_message(study: optuna.Study, stored: Mapping[str, Any], record: Mapping[str, Any],
                  names: list[str], tenant: str | None = None,
                  arguments: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """Why ``study`` cannot take this run's trials: each differing choice in the caller's
    spelling, stored value and this run's; the data only when nothing else differs."""
    which = f"{arg('study')} {study.study_name!r}" + (
        f" (tenant {tenant!r})" if tenant is not None else "")
    if "entrance" in names:
        here = "the command line" if renamed() else str(record["entrance"])
        return (
            f"{which} was tuned by {_ENTRANCES.get(str(stored['entrance']), stored['entrance'])}"
            f", which {here} cannot resume: its trials were scored another way (another model, "
            f"validation or data); use {_another_study(record)}."
        )
    # The validated limits follow from the choices behind them: those are named.
    derived = "limits" in names and any(n in _BEHIND_LIMITS for n in names)
    named = [n for n in names if n not in _DATA and not (n == "limits" and derived)]
    if "confidence" in named and None in (stored.get("confidence"), record.get("confidence")):
        # No safety rows and no test of them without confidence.
        named = [n for n in named if n not in ("safety_size", "bound")]
    # Each pruner as the caller names its kind (fairtune.tuning.PRUNER_NAMES), else its record.
    kinds = [None if side.get("pruner") is None else
             _PRUNERS.get(str(side["pruner"]).split("(", 1)[0], side["pruner"])
             for side in (stored, record)]
    if "pruner" in named and None in kinds:
        named = [n for n in named if n != "budgets"]  # no budgets without a pruner
    elif "budgets" in named and kinds[0] == kinds[1]:
        named = [n for n in named if n != "pruner"]  # the same pruner, set up for the budgets
    if not named:
        return _data_message(which, stored, record)

    def argument(name: str) -> str:
        chosen = {**_ARGUMENTS, **(arguments or {})}.get(name, (name,))
        return _listed([arg(a) for a in chosen if has_name(a)] or [arg(name)])

    items: list[tuple[str, str, str]] = []
    for n in named:
        parts = _items(stored, record, n) if n == "dataset" or (
            n == "validation" and not (arguments or {}).get("validation")) else None
        old, new = kinds if n == "pruner" and kinds[0] != kinds[1] else (stored[n], record[n])
        items += parts or [(argument(n), _show(old), _show(new))]
    what = "; ".join(f"{a} {old}, but this run asks for {new}" for a, old, new in items)
    return (
        f"{which} was tuned with {what}: its trials were scored another way and are not "
        "comparable with this run's; use the same "
        f"{_listed(list(dict.fromkeys(a for a, _, _ in items)))} as before, or "
        f"{_another_study(record)}."
    )


def check_tenant(study: optuna.Study, record: Mapping[str, Any], tenant: str | None,
                 trial: Any = None, owner: str | None = None) -> None:
    """Refuse a run whose ``tenant`` does not fit the study (a shared study with no tenant or
    another one, or a ``trial`` of another tenant); tag an untagged ``trial`` as ``tenant``'s.
    """
    tenants = read_setup(study).get("tenants") or record.get("tenants")
    if tenant is None and tenants:
        raise ValueError(
            f"{arg('tenant')} must be one of {list(tenants)}: {arg('study')} "
            f"{study.study_name!r} is shared by these tenants, each scoring the trials on its own "
            f"data with its own setup, so a run without a tenant would mix its trials into "
            f"theirs, but got {got('tenant', None)}.")
    if tenant is not None and tenants and tenant not in tenants:
        asked = record.get("tenants")  # this run's, when they differ: the likelier mistake
        also = f", and {got('tenants', asked)}" if asked and asked != tenants else ""
        raise ValueError(
            f"{arg('tenant')} must be one of {list(tenants)} (the tenants of {arg('study')} "
            f"{study.study_name!r}), but got {got('tenant', tenant)}{also}.")
    if tenant is None or trial is None:
        return
    if owner is None:
        trial.storage.set_trial_user_attr(trial_id(trial), TENANT_KEY, tenant)
    elif owner != tenant:
        raise ValueError(
            f"{arg('tenant')} {tenant!r} scores its own data, but trial #{trial.number} of "
            f"{arg('study')} {study.study_name!r} is tenant {owner!r}'s: run the objective of "
            f"tenant {owner!r} for it (tenancy.optimize(study, {tenant!r}, ...) gives tenant "
            f"{tenant!r}'s trials to this one).")


def rows_record(rows: Any, data_fingerprint: Any) -> dict[str, str | None]:
    """The ``rows`` entry of a FairObjective's rows (:class:`fairtune.tuning._data.TuningRows`):
    a digest of each part (None for a part the search lacks)."""

    def digest(*parts: Any, **folds: Any) -> str | None:
        return None if parts[0] is None else data_fingerprint(*parts, **folds)

    return {"tuning": digest(rows.X_dev, rows.y_dev, rows.s_dev, folds=rows.splits.folds),
            "test": digest(rows.X_test, rows.y_test, rows.s_test),
            "safety": digest(rows.X_safe, rows.y_safe, rows.s_safe)}


def check_stored(study: optuna.Study, record: Mapping[str, Any], *,
                 tenant: str | None = None,
                 arguments: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Compare ``record`` with the setup ``study`` stores, storing nothing (a refit's check);
    returns ``record`` in stored form. Raises :class:`SetupError` (:func:`setup_message`)."""
    record = {name: _plain(value) for name, value in record.items()}
    check_tenant(study, record, tenant)
    stored = read_setup(study, tenant)
    names = differences(stored, record)
    if names:
        raise SetupError(setup_message(study, stored, record, names, tenant, arguments), names)
    return record


def check_setup(study: optuna.Study, record: Mapping[str, Any], *,
                tenant: str | None = None,
                arguments: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """Compare ``record`` with the setup ``study`` stores, then store what it lacks.

    ``arguments`` names the entrance's own arguments for an entry, e.g. ``{"model":
    ("estimator", "param_distributions")}``; the shared entries are stored in the study's
    record, a tenant's own under its key.
    """
    record = check_stored(study, record, tenant=tenant, arguments=arguments)
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

    # A stored study of the command line's --study-name is named, and another name advised.
    which = f"{arg('study')} {study.study_name!r}" if renamed() else arg("study")
    if objectives:
        expected = [StudyDirection.MAXIMIZE if d == "maximize" else StudyDirection.MINIMIZE
                    for d in directions]
        if list(study.directions) != expected:
            raise ValueError(
                f"{which} must have directions={directions} for the objectives {objectives}, "
                f"but got directions={[d.name.lower() for d in study.directions]}; "
                + (f"use {_another_study({})}." if renamed() else
                   "create the study with directions=objective.directions."))
    elif len(study.directions) != 1 or study.direction != StudyDirection.MAXIMIZE:
        raise ValueError(
            f"{which} must maximize one value: FairObjective returns its {metric}, to be "
            f"maximized, but got directions={[d.name for d in study.directions]}; "
            + (f"use {_another_study({})}." if renamed() else
               "create the study with direction='maximize'."))


def objective_setup(rows: Any, data_fingerprint: Any, *, target: Any, pos_label: Any,
                    model: str, metric: str, objectives: list[str], limits: list[Any],
                    margin: float, mitigation: list[str], hidden: bool, cv: int | None,
                    validation_size: float | None, test_size: float | None, random_state: int,
                    budgets: Any, resource: str, prune_unfair: bool, confidence: float | None,
                    safety_size: float | None, bound: str | None) -> dict[str, Any]:
    """:attr:`FairObjective.setup <fairtune.tuning.FairObjective.setup>`: the record of an
    objective's choices (its arguments, ``hidden`` for ``use_sensitive_feature=False``) and of
    the ``rows`` it scores (:class:`fairtune.tuning._data.TuningRows`; ``data_fingerprint``:
    :func:`fairtune.tuning._data.data_fingerprint`, for :func:`rows_record`)."""
    dropped = list(rows.dropped)
    # The dataset's text, and its parts apart so that a message names the one that differs.
    dataset = {"name": rows.name, "sensitive": rows.sensitive_name, "hidden": hidden,
               "dropped": dropped}
    text = (f"{rows.name} (sensitive: {rows.sensitive_name}"
            f"{', hidden from the model' if hidden else ''}"
            f"{', without ' + ', '.join(dropped) if dropped else ''})")
    validation = {"cv": cv, "validation_size": None if cv else validation_size,
                  "test_size": test_size, "random_state": random_state}
    scheme = f"{cv}-fold cross-validation" if cv else f"a {validation_size:.0%} validation split"
    held_out = f", {test_size:g} held out for testing" if test_size else ""
    return setup_record(
        entrance="FairObjective", dataset=text, target=target,
        pos_label=pos_label if pos_label is not None else rows.favourable,
        model=model, metric=metric, objectives=list(objectives) or None,
        limits_given=sorted(str(limit) for limit in limits),
        limits=sorted(str(limit) for limit in rows.limits), margin=float(margin),
        mitigation=list(mitigation), validation=f"{scheme}{held_out}, split seed {random_state}",
        budgets=None if budgets is None else list(budgets), resource=resource,
        prune_unfair=prune_unfair, data=rows.fingerprint, confidence=confidence,
        safety_size=safety_size, bound=bound, rows=rows_record(rows, data_fingerprint),
        parts={"dataset": dataset, "validation": validation},
    )


def study_record(record: Mapping[str, Any], directions: Sequence[str], study: optuna.Study,
                 pruner: Any, check_pruner: Any) -> dict[str, Any]:
    """A FairObjective's setup ``record`` with what ``study`` adds (its pruner, or ``pruner``,
    and its sampler's tenants), after checking the study's directions (the objective's, [] for
    one maximized metric) and the pruner against the record's ``budgets`` (``check_pruner``:
    :func:`fairtune.tuning._trial.check_pruner`)."""
    check_directions(study, list(directions) or ["maximize"],
                     objectives=record["objectives"] or [], metric=record["metric"])
    pruner = study.pruner if pruner is None else pruner
    check_pruner(pruner, record["budgets"])
    tenants = getattr(study.sampler, "tenants", None)
    return {**record, "pruner": describe_pruner(pruner),
            "tenants": None if tenants is None else list(tenants)}
