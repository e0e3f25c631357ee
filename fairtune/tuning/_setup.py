"""The setup of a search: every argument that changes what a trial's score means, stored once.

A study's trials are comparable only when they were scored the same way: on the same rows,
labels, groups and validation splits, with the same model space or pipeline, metric, limits,
margin, mitigation, budgets, pruner, tenants and validation scheme. Each entrance
(:class:`~fairtune.tuning.FairObjective`, :class:`~fairtune.tuning.FairSearchCV`, the command
line for one team or many) builds one record of these (:func:`setup_record`); the first trial
stores it with the study under one key (:data:`fairtune._keys.SETUP_KEY`, a tenant's under
``"fairtune:setup:<tenant>"``), and every later run compares its own record with the stored one
(:func:`check_setup`): one message names each differing argument in the caller's spelling
(``margin=0.01`` in Python, ``--margin 0.01`` on the command line). A refit of the study's
trials (``refit_best``, ``certify``) and an entrance that can check before it creates a trial
(:func:`fairtune.tenancy.optimize`) make the same comparison and store nothing
(:func:`check_stored`).

Entries a stored record does not have (a study stored by an older version) are taken from the
run and are not differences. The tenants of a shared study are a fact of the study, not of one
tenant: they are compared for every tenant that joins.

What the user chose and what follows from it. ``limits_given`` holds the limits as given;
``limits`` the limits the trials are validated against (the given ones less ``margin``, and
with ``confidence`` less the width of the bound the safety rows allow), which
:func:`fairtune.fairness.study_limits` reads to judge the trials. A difference in ``limits``
is a consequence when a choice behind it differs (``limits_given``, ``margin``,
``confidence``, ``safety_size``, the data): the message names those choices, with the values
the user gave. Likewise ``data`` (a digest of the tuning rows with their splits and safety
rows) and ``rows`` (digests of the tuning rows, the test split and the safety rows apart) say
which rows changed, and the ``dataset`` text (the data's name, its sensitive features, whether
the model sees them, the columns dropped) is compared part by part, each part named by the
argument that sets it; so is the ``validation`` text (the folds or validation split, the
test split, the split seed). A file's name and checksum changing with its rows (the
command line's ``--data``) are followed by which rows changed.
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
    TENANT_KEY,
    TENANT_SETUP_PREFIX,
    VALIDATION_KEY,
)
from fairtune._names import arg, got, has_name, renamed
from fairtune._optuna_compat import trial_id

if TYPE_CHECKING:
    import optuna

__all__ = ["SetupError", "check_directions", "check_setup", "check_stored", "check_tenant",
           "dataset_text", "describe_pruner", "read_setup", "setup_record"]


class SetupError(ValueError):
    """A study's trials were scored with another setup (:func:`check_stored`).

    Attributes:
        names: The setup entries that differ.
        data_only: Whether only the data differs (the rows, labels or groups), every argument
            being the same.
    """

    def __init__(self, message: str, names: list[str]) -> None:
        super().__init__(message)
        self.names = list(names)
        self.data_only = all(name in _DATA for name in names)

# The record's entries, in the order messages and reports list them; each is the Python
# argument that sets it (the command line renames them to its flags through fairtune._names).
FIELDS: tuple[str, ...] = (
    "entrance", "dataset", "target", "pos_label", "model", "metric", "objectives",
    "limits_given", "limits", "margin", "mitigation", "validation", "budgets", "resource",
    "pruner", "prune_unfair", "tenants", "confidence", "safety_size", "data", "rows", "parts",
)
# Entries shared by every tenant of a study (stored in the study's own record): the tenants,
# and what the sampler proposes for all of them, the model space and the mitigation's settings.
_SHARED: tuple[str, ...] = ("tenants", "model", "mitigation")
# What each entry is, for messages: the arguments that choose it.
_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "validation": ("cv", "validation_size", "test_size", "random_state"),
    "model": ("model",), "limits_given": ("limits",),
}
# The choices the validated ``limits`` follow from.
_BEHIND_LIMITS: tuple[str, ...] = ("limits_given", "margin", "confidence", "safety_size", "data",
                                   "rows")
# The data entries: which rows the trials are scored on (named when nothing else differs).
_DATA: tuple[str, ...] = ("data", "rows")
# Choices that change which rows land in which part, or their labels (a file's rows are then
# not named as changed: the choice explains it).
_SPLITTING: tuple[str, ...] = ("validation", "target", "pos_label", "confidence", "safety_size")
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
    """What a pruner does to a trial's steps, as the setup records it: None when it prunes
    nothing (``NopPruner``, or Optuna's default without budgets to prune at: see
    :func:`is_default_pruner`), else its class and settings, e.g.
    ``"SuccessiveHalvingPruner(min_early_stopping_rate=0, min_resource=1, reduction_factor=3)"``.
    """
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
            != _compared(name, record[name], stored[name])]


def _compared(name: str, value: Any, other: Any) -> Any:
    """An entry as the comparison with ``other`` sees it: a ``pos_label`` of 1 or True (or
    their text, a file's ``positive``) favours 1, which 0/1 or boolean labels favour without
    one: the same scoring as none (labels it cannot favour are refused with it); of the
    ``rows`` digests, those both records hold (an older version stored fewer)."""
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


def dataset_parts(name: str, sensitive: str, *, hidden: bool, dropped: list[str]
                  ) -> dict[str, Any]:
    """The ``dataset`` entry's parts, stored under ``parts`` beside its text
    (:func:`dataset_text`), so that a message names the one that differs."""
    return {"name": name, "sensitive": sensitive, "hidden": bool(hidden),
            "dropped": list(dropped)}


def dataset_text(name: str, sensitive: str, *, hidden: bool, dropped: list[str]) -> str:
    """The ``dataset`` entry: the data's name, its sensitive features, whether the model sees
    them and the columns it does not see, e.g. ``"german (sensitive: sex, hidden from the
    model)"``."""
    hide = ", hidden from the model" if hidden else ""
    without = f", without {', '.join(dropped)}" if dropped else ""
    return f"{name} (sensitive: {sensitive}{hide}{without})"


def _parts(stored: Mapping[str, Any], record: Mapping[str, Any], entry: str
           ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Both records' parts of ``entry``, or None when one lacks them (an older version's)."""
    old, new = ((side.get("parts") or {}).get(entry) for side in (stored, record))
    return (old, new) if isinstance(old, dict) and isinstance(new, dict) else None


def _dataset_items(stored: Mapping[str, Any], record: Mapping[str, Any]
                   ) -> list[tuple[str, str, str]] | None:
    """``(argument, stored, this run's)`` for each part of the ``dataset`` entries that
    differs, or None without the parts of both."""
    both = _parts(stored, record, "dataset")
    if both is None:
        return None
    old, new = both
    own_flag = renamed() and has_name("sensitive")  # else the data names its sensitive features
    if old["name"] != new["name"] and not own_flag:
        return [(arg("dataset"), repr(str(stored["dataset"])), repr(str(record["dataset"])))]
    items = []
    if old["name"] != new["name"]:
        items.append((arg("dataset"), repr(old["name"]), repr(new["name"])))
    if old["sensitive"] != new["sensitive"]:
        spelled = arg("sensitive") if own_flag else f"the sensitive features of {arg('dataset')}"
        items.append((spelled, repr(old["sensitive"]), repr(new["sensitive"])))
    if old["hidden"] != new["hidden"]:
        said = ({True: "'on'", False: "'off'"} if renamed()
                else {True: "False", False: "True"})  # use_sensitive_feature
        items.append((arg("use_sensitive_feature"), said[old["hidden"]], said[new["hidden"]]))
    if old["dropped"] != new["dropped"]:
        items.append((arg("drop_columns"), repr(", ".join(old["dropped"]) or "none"),
                      repr(", ".join(new["dropped"]) or "none")))
    return items or None


def _validation_items(stored: Mapping[str, Any], record: Mapping[str, Any]
                      ) -> list[tuple[str, str, str]] | None:
    """``(argument, stored, this run's)`` for each part of the ``validation`` entries that
    differs (the folds or the validation split, the test split, the seed), with the values as
    typed; None without the parts of both."""
    both = _parts(stored, record, "validation")
    if both is None:
        return None
    old, new = both
    items = []
    for name in ("cv", "validation_size", "test_size", "random_state"):
        if name == "validation_size" and (old["cv"] or new["cv"]):
            continue  # a change to or from folds is named as `cv`
        if old[name] != new[name]:
            items.append((arg(name), _show(old[name]), _show(new[name])))
    return items or None


def _rows_changed(stored: Mapping[str, Any], record: Mapping[str, Any]) -> list[str]:
    """The parts of the ``rows`` entries (:data:`_ROWS`) that differ."""
    old, new = stored.get("rows") or {}, record.get("rows") or {}
    return [part for part in _ROWS if part in old and part in new and old[part] != new[part]]


def _reordered(stored: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Whether only the order of the columns changed (the ``rows`` digests in name order)."""
    old, new = stored.get("rows") or {}, record.get("rows") or {}
    return old.get("unordered") is not None and old.get("unordered") == new.get("unordered")


def _rows_text(stored: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """Which rows changed, or that only the order of the columns did."""
    if _reordered(stored, record):
        return ("the columns were reordered: the same rows and values in another column "
                "order, which the models read their inputs in")
    return " and ".join(_ROWS[p].format(test_size=arg("test_size"), confidence=arg("confidence"))
                        for p in _rows_changed(stored, record)) + (
        " changed: a value, label or group differs")


def _pruner_kind(described: Any) -> Any:
    """A pruner's record (:func:`describe_pruner`) as the caller names its kind: a name of
    :data:`fairtune.tuning.PRUNER_NAMES` for one of their classes, else the record."""
    if described is None:
        return None
    return _PRUNERS.get(str(described).split("(", 1)[0], described)


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _another_study(record: Mapping[str, Any]) -> str:
    """How this entrance starts a new study."""
    if record.get("entrance") == "FairSearchCV":
        return f"a new {arg('study')} or study=None"
    return f"another {arg('study_name')}"


def _data_message(study: optuna.Study, stored: Mapping[str, Any], record: Mapping[str, Any],
                  whose: str, follows: str = "") -> str:
    """The rows differ and nothing else: which rows, as far as the records tell."""
    old, new = stored.get("rows") or {}, record.get("rows") or {}
    changed = _rows_changed(stored, record)
    if changed and (changed != ["tuning"] or "data" not in stored or _reordered(stored, record)):
        digests = "; ".join(f"{old[p]!r} there, {new[p]!r} here" for p in changed)
        rows = f"{_rows_text(stored, record)} (digest {digests})"
    else:
        rows = (f"data fingerprint {stored.get('data')!r} there, {record.get('data')!r} here: "
                "other rows, labels, groups or validation splits")
    return (
        f"{arg('study')} {study.study_name!r}{whose} holds trials scored on other data ({rows})"
        f"{follows}, so its best trial would be chosen on scores that do not measure these "
        f"rows; create a new study for this data ({_another_study(record)})."
    )


def setup_message(study: optuna.Study, stored: Mapping[str, Any], record: Mapping[str, Any],
                  names: list[str], tenant: str | None = None,
                  arguments: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """Why ``study`` cannot take this run's trials: each differing choice, named by the
    arguments that choose it, with the stored value and this run's; only the data when
    nothing else differs (other settings explain other data). The validated ``limits`` are
    named only when no choice behind them differs (a record of an older version, without
    ``limits_given``); otherwise they follow, as a consequence."""
    whose = f" (tenant {tenant!r})" if tenant is not None else ""
    if "entrance" in names:
        here = "the command line" if renamed() else str(record["entrance"])
        return (
            f"{arg('study')} {study.study_name!r}{whose} was tuned by "
            f"{_ENTRANCES.get(str(stored['entrance']), stored['entrance'])}, which {here} "
            "cannot resume: its trials were scored another way (another model, validation "
            f"or data); use {_another_study(record)}."
        )
    behind = [n for n in names if n in _BEHIND_LIMITS]
    derived = "limits" in names and bool(behind)
    tightened = any(side.get("limits") != side.get("limits_given", side.get("limits"))
                    for side in (stored, record))
    named = [n for n in names if n not in _DATA and not (n == "limits" and derived)]
    if "confidence" in named and None in (stored.get("confidence"), record.get("confidence")):
        named = [n for n in named if n != "safety_size"]  # no safety rows without confidence
    kinds = [_pruner_kind(side.get("pruner")) for side in (stored, record)]
    if "pruner" in named and None in kinds:
        named = [n for n in named if n != "budgets"]  # no budgets without a pruner
    elif "budgets" in named and kinds[0] == kinds[1]:
        named = [n for n in named if n != "pruner"]  # the same pruner, set up for the budgets
    follows = ""
    if derived and (tightened or "limits_given" not in stored):
        follows = (f", which validates the trials against {_show(record['limits'])} instead of "
                   f"{_show(stored['limits'])}")
    if not named:
        return _data_message(study, stored, record, whose, follows)

    def argument(name: str) -> str:
        chosen = {**_ARGUMENTS, **(arguments or {})}.get(name, (name,))
        spelled = [arg(a) for a in chosen if has_name(a)] or [arg(name)]
        return _listed(spelled)

    def note(name: str) -> str:
        if name != "limits":
            return ""
        if stored.get("confidence") or record.get("confidence"):
            return (f" (the limits the trials are validated against: {arg('limits')} less "
                    f"{arg('margin')} and the width of the {arg('confidence')} bound)")
        return (f" (the limits the trials are validated against: {arg('limits')} less "
                f"{arg('margin')})")

    items: list[tuple[str, str, str]] = []
    for n in named:
        parts = None
        if n == "dataset":
            parts = _dataset_items(stored, record)
            # A file's name and checksum hide which rows changed: say it, unless another
            # choice (the splits, the labels, the sensitive features) explains it.
            changed = _rows_changed(stored, record)
            if changed and parts and len(parts) == 1 and parts[0][0] == arg("dataset") and not (
                    set(named) & set(_SPLITTING)):
                parts = [(*parts[0][:2], f"{parts[0][2]} ({_rows_text(stored, record)})")]
        elif n == "validation" and not (arguments or {}).get("validation"):
            parts = _validation_items(stored, record)
        old, new = kinds if n == "pruner" and kinds[0] != kinds[1] else (stored[n], record[n])
        items += parts or [(argument(n), _show(old), _show(new) + note(n))]
    what = "; ".join(f"{a} {old}, but this run asks for {new}" for a, old, new in items)
    return (
        f"{arg('study')} {study.study_name!r}{whose} was tuned with {what}{follows}: its "
        "trials were scored another way and are not comparable with this run's; use the same "
        f"{_listed(list(dict.fromkeys(a for a, _, _ in items)))} as before, or "
        f"{_another_study(record)}."
    )


def check_tenant(study: optuna.Study, record: Mapping[str, Any], tenant: str | None,
                 trial: Any = None, owner: str | None = None) -> None:
    """Refuse a run whose ``tenant`` does not fit the study: a study that tenants share (its
    record, or its sampler, lists them) with no tenant or a tenant not among them, or a
    ``trial`` of another tenant
    (:func:`fairtune.tenancy.tenant_of`; an untagged trial of a run with a tenant is tagged as
    that tenant's before its first suggestion, so that the sampler proposes the tenant's
    point). Nothing is stored by a refused run.

    Raises:
        ValueError: Naming ``tenant`` and the study's tenants, or both tenants.
    """
    tenants = read_setup(study).get("tenants") or record.get("tenants")
    if tenant is None and tenants:
        raise ValueError(
            f"{arg('tenant')} must be one of {list(tenants)}: {arg('study')} "
            f"{study.study_name!r} is shared by these tenants, each scoring the trials on its own "
            f"data with its own setup, so a run without a tenant would mix its trials into "
            f"theirs, but got {got('tenant', None)}.")
    if tenant is not None and tenants and tenant not in tenants:
        raise ValueError(
            f"{arg('tenant')} must be one of {list(tenants)} (the tenants of {arg('study')} "
            f"{study.study_name!r}), but got {got('tenant', tenant)}.")
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
    a digest of the tuning rows with their splits, of the test split and of the safety rows
    (None for a part the search does not have), so that a changed held-out row is refused
    too, and named, and one of them all with the columns in name order, so that a file whose
    columns were only reordered is named as such (``data_fingerprint``:
    :func:`fairtune.tuning._data.data_fingerprint`)."""

    def digest(*parts: Any, **folds: Any) -> str | None:
        return None if parts[0] is None else data_fingerprint(*parts, **folds)

    def unordered(X: Any) -> Any:  # the columns in the order of their names
        return None if X is None else X.iloc[:, sorted(range(X.shape[1]),
                                                       key=lambda i: str(X.columns[i]))]

    return {"tuning": digest(rows.X_dev, rows.y_dev, rows.s_dev, folds=rows.splits.folds),
            "test": digest(rows.X_test, rows.y_test, rows.s_test),
            "safety": digest(rows.X_safe, rows.y_safe, rows.s_safe),
            # All of them with the columns in name order: tells reordered columns from
            # changed rows.
            "unordered": data_fingerprint(
                *(unordered(X) for X in (rows.X_dev, rows.X_test, rows.X_safe)), rows.y_dev,
                rows.s_dev, rows.y_test, rows.s_test, rows.y_safe, rows.s_safe,
                folds=rows.splits.folds)}


def check_stored(study: optuna.Study, record: Mapping[str, Any], *,
                 tenant: str | None = None,
                 arguments: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Compare ``record`` with the setup ``study`` stores, storing nothing: what every run,
    resume and refit of the study's trials checks first (:func:`check_tenant`, then each
    entry both records hold). Returns ``record`` in stored form.

    Raises:
        ValueError: If ``study`` holds trials scored with another setup (naming each
            differing argument, :func:`setup_message`), or does not fit ``tenant``.
    """
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

    The one comparison of every entrance and every resume (:func:`check_stored`): entries that
    differ raise one ValueError naming them (:func:`setup_message`, with ``arguments`` naming the
    entrance's own arguments for an entry, e.g. ``{"model": ("estimator",
    "param_distributions")}``); entries not stored yet are stored (the shared ones in the study's
    record, a tenant's own under its key).

    Raises:
        ValueError: If ``study`` holds trials scored with another setup, or is shared by
            tenants and ``tenant`` is None or not one of them (:func:`check_tenant`).
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


def objective_setup(objective: Any, data_fingerprint: Any) -> dict[str, Any]:
    """:attr:`FairObjective.setup <fairtune.tuning.FairObjective.setup>`: the record of an
    objective's choices and of the rows it scores (``data_fingerprint``:
    :func:`fairtune.tuning._data.data_fingerprint`, for :func:`rows_record`)."""
    o = objective
    dataset = dict(name=o.dataset_name, sensitive=o.sensitive_name,
                   hidden=not o.use_sensitive_feature, dropped=o.drop_columns)
    validation = {"cv": o.cv, "validation_size": None if o.cv else o.validation_size,
                  "test_size": o.test_size, "random_state": o.random_state}
    return setup_record(
        entrance="FairObjective", dataset=dataset_text(**dataset), target=o._target,
        pos_label=o.pos_label if o.pos_label is not None else o._rows.favourable,
        model=o.space.name, metric=o.metric, objectives=list(o.objectives) or None,
        limits_given=sorted(str(limit) for limit in o.limits),
        limits=sorted(str(limit) for limit in o.tuning_limits), margin=float(o.margin),
        mitigation=list(o.mitigation),
        validation=validation_text(o.cv, o.validation_size, o.test_size, o.random_state),
        budgets=None if o.budgets is None else list(o.budgets), resource=o.resource,
        prune_unfair=o.prune_unfair, data=o.data_fingerprint, confidence=o.confidence,
        safety_size=o.safety_size, rows=rows_record(o._rows, data_fingerprint),
        parts={"dataset": dataset_parts(**dataset), "validation": validation},
    )


def study_record(objective: Any, study: optuna.Study, pruner: Any, check_pruner: Any
                 ) -> dict[str, Any]:
    """A FairObjective's record as a run of ``study`` compares it (:func:`in_study`, with
    ``pruner`` or the study's), after the checks that come first: the study's directions,
    and the pruner against ``budgets`` (``check_pruner``:
    :func:`fairtune.tuning._trial.check_pruner`)."""
    check_directions(study, objective.directions or ["maximize"],
                     objectives=objective.objectives, metric=objective.metric)
    pruner = study.pruner if pruner is None else pruner
    check_pruner(pruner, objective.budgets)
    return in_study(objective.setup, study, pruner)
