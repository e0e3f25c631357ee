"""Search spaces as functions of a trial: those of the Fair BO paper (Perrone et al. 2021,
appendix A) and a forest of full-depth trees.

Each space is a function ``trial -> unfitted estimator``: it suggests the hyperparameters with
Optuna's ``trial.suggest_*`` calls and returns a scikit-learn compatible classifier. Spaces have a
fixed dimension (no conditional parameters), which suits GP-based samplers.

======================  ====  ==================================================================
name                    dims  parameters
======================  ====  ==================================================================
``xgboost``             7     n_estimators 1-256 (log), learning_rate 0.01-1 (log), gamma 0-0.1,
                              reg_alpha 1e-3-1e3 (log), reg_lambda 1e-3-1e3 (log),
                              subsample 0.01-1, max_depth 1-16
``random_forest``       4     n_estimators 1-64 (log), min_samples_split 0.01-0.5 (log, a
                              fraction of the samples), max_depth 1-5, criterion gini/entropy
``random_forest_deep``  4     n_estimators 8-128 (log), min_samples_leaf 1-128 (log),
                              max_features sqrt/log2, criterion gini/entropy; trees grown to
                              full depth, regularized by their leaf size (not the paper's)
``mlp``                 11    n_layers 1-4, layer_1..layer_4 sizes 2-32 (log; only the first
                              n_layers are used), activation logistic/tanh/relu, tol 1e-5-1e-2
                              (log), alpha (L2) 1e-6-0.1 (log), learning_rate_init 1e-6-1e-2
                              (log), beta_1 and beta_2 1e-3-0.99 (log); Adam
``linear``              6     max_iter 1-128, penalty l1/l2/elasticnet, l1_ratio 0-1, alpha
                              1e-3-1e3 (log), eta0 1e-4-0.1 (log), learning_rate
                              constant/optimal/invscaling/adaptive; SGD on the logistic loss
======================  ====  ==================================================================

The paper's forest space keeps its trees at depth 5 or less and cannot express
``RandomForestClassifier()``, which on Adult and German credit is more accurate than the paper's
forest tuned for accuracy alone (``benchmarks/vs_mitigation.py``); ``random_forest_deep`` grows
every tree to full depth, tunes the leaf size instead, and its defaults are scikit-learn's own.

Each built-in space also names its *defaults*: the point of the space nearest the estimator
library's own defaults (``XGBClassifier()``, ``RandomForestClassifier()``, ...), which is the model
a practitioner gets without tuning. :meth:`FairObjective.enqueue_defaults
<fairtune.tuning.FairObjective.enqueue_defaults>` makes it a study's first trial, so that a search
starts from that model and keeps it when nothing it finds validates better.

Register your own with :func:`register_space`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairtune._names import arg, got

if TYPE_CHECKING:
    import optuna

__all__ = ["SPACES", "Space", "get_space", "register_space"]

SpaceFunction = Callable[["optuna.Trial"], Any]


@dataclass(frozen=True)
class Space:
    """A named search space.

    Attributes:
        name: Registry name.
        build: ``trial -> unfitted estimator``.
        needs_scaling: Whether numeric features should be standardized for this model
            (gradient-based models: ``mlp``, ``linear``).
        defaults: The space's point nearest the estimator library's defaults (every parameter
            ``build`` suggests), or ``None`` when the space names none.
        handles_missing: Whether the model fits rows with missing numeric values (XGBoost and
            scikit-learn's forests do; the linear model and the MLP need complete rows).
    """

    name: str
    build: SpaceFunction
    needs_scaling: bool = False
    defaults: Mapping[str, Any] | None = field(default=None, hash=False)
    handles_missing: bool | None = None


def xgboost(trial: optuna.Trial, *, random_state: int = 0) -> Any:
    """XGBoost classifier, 7 hyperparameters."""
    from xgboost import XGBClassifier

    return XGBClassifier(
        n_estimators=trial.suggest_int("n_estimators", 1, 256, log=True),
        learning_rate=trial.suggest_float("learning_rate", 0.01, 1.0, log=True),
        gamma=trial.suggest_float("gamma", 0.0, 0.1),
        reg_alpha=trial.suggest_float("reg_alpha", 1e-3, 1e3, log=True),
        reg_lambda=trial.suggest_float("reg_lambda", 1e-3, 1e3, log=True),
        subsample=trial.suggest_float("subsample", 0.01, 1.0),
        max_depth=trial.suggest_int("max_depth", 1, 16),
        tree_method="hist",
        n_jobs=1,
        random_state=random_state,
    )


def random_forest(trial: optuna.Trial, *, random_state: int = 0) -> Any:
    """Random forest classifier, 4 hyperparameters."""
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(
        n_estimators=trial.suggest_int("n_estimators", 1, 64, log=True),
        min_samples_split=trial.suggest_float("min_samples_split", 0.01, 0.5, log=True),
        max_depth=trial.suggest_int("max_depth", 1, 5),
        criterion=trial.suggest_categorical("criterion", ["gini", "entropy"]),
        n_jobs=1,
        random_state=random_state,
    )


def random_forest_deep(trial: optuna.Trial, *, random_state: int = 0) -> Any:
    """Random forest of full-depth trees regularized by their leaf size, 4 hyperparameters."""
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(
        n_estimators=trial.suggest_int("n_estimators", 8, 128, log=True),
        min_samples_leaf=trial.suggest_int("min_samples_leaf", 1, 128, log=True),
        max_features=trial.suggest_categorical("max_features", ["sqrt", "log2"]),
        criterion=trial.suggest_categorical("criterion", ["gini", "entropy"]),
        n_jobs=1,
        random_state=random_state,
    )


def mlp(trial: optuna.Trial, *, random_state: int = 0) -> Any:
    """Multi-layer perceptron trained with Adam, 11 hyperparameters.

    All four layer sizes are suggested in every trial (a fixed-dimension space, better for GP
    samplers); only the first ``n_layers`` are used.
    """
    from sklearn.neural_network import MLPClassifier

    n_layers = trial.suggest_int("n_layers", 1, 4)
    sizes = [trial.suggest_int(f"layer_{i}", 2, 32, log=True) for i in range(1, 5)]
    return MLPClassifier(
        hidden_layer_sizes=tuple(sizes[:n_layers]),
        activation=trial.suggest_categorical("activation", ["logistic", "tanh", "relu"]),
        tol=trial.suggest_float("tol", 1e-5, 1e-2, log=True),
        alpha=trial.suggest_float("alpha", 1e-6, 0.1, log=True),
        learning_rate_init=trial.suggest_float("learning_rate_init", 1e-6, 1e-2, log=True),
        beta_1=trial.suggest_float("beta_1", 1e-3, 0.99, log=True),
        beta_2=trial.suggest_float("beta_2", 1e-3, 0.99, log=True),
        solver="adam",
        max_iter=200,
        random_state=random_state,
    )


def linear(trial: optuna.Trial, *, random_state: int = 0) -> Any:
    """Linear model (logistic loss) trained by SGD, 6 hyperparameters."""
    from sklearn.linear_model import SGDClassifier

    return SGDClassifier(
        loss="log_loss",
        max_iter=trial.suggest_int("max_iter", 1, 128),
        penalty=trial.suggest_categorical("penalty", ["l1", "l2", "elasticnet"]),
        l1_ratio=trial.suggest_float("l1_ratio", 0.0, 1.0),
        alpha=trial.suggest_float("alpha", 1e-3, 1e3, log=True),
        eta0=trial.suggest_float("eta0", 1e-4, 0.1, log=True),
        learning_rate=trial.suggest_categorical("learning_rate", ["constant", "optimal",
                                                                  "invscaling", "adaptive"]),
        tol=None,
        random_state=random_state,
    )


# The library defaults, clipped into each space where they lie outside it: XGBoost's reg_alpha 0
# (log scale: its lower end), the forest's 100 trees, unlimited depth and min_samples_split=2 (the
# most, deepest and finest the space allows), the MLP's 100 hidden units and beta_2 0.999, the SGD
# model's 1000 epochs and alpha 1e-4.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "xgboost": {"n_estimators": 100, "learning_rate": 0.3, "gamma": 0.0, "reg_alpha": 1e-3,
                "reg_lambda": 1.0, "subsample": 1.0, "max_depth": 6},
    "random_forest": {"n_estimators": 64, "min_samples_split": 0.01, "max_depth": 5,
                      "criterion": "gini"},
    "random_forest_deep": {"n_estimators": 100, "min_samples_leaf": 1, "max_features": "sqrt",
                           "criterion": "gini"},
    "mlp": {"n_layers": 1, "layer_1": 32, "layer_2": 32, "layer_3": 32, "layer_4": 32,
            "activation": "relu", "tol": 1e-4, "alpha": 1e-4, "learning_rate_init": 1e-3,
            "beta_1": 0.9, "beta_2": 0.99},
    "linear": {"max_iter": 128, "penalty": "l2", "l1_ratio": 0.15, "alpha": 1e-3, "eta0": 0.01,
               "learning_rate": "optimal"},
}

#: The registered search spaces by name: the five above and those added by
#: :func:`register_space`.
SPACES: dict[str, Space] = {  # the gradient-based models need scaled, complete rows
    build.__name__: Space(build.__name__, build, needs_scaling=not trees,
                          defaults=_DEFAULTS[build.__name__], handles_missing=trees)
    for build, trees in ((xgboost, True), (random_forest, True), (random_forest_deep, True),
                         (mlp, False), (linear, False))
}


def get_space(name: str) -> Space:
    """Look up a registered space; unknown names list the valid ones."""
    if name not in SPACES:
        raise ValueError(
            f"{arg('model')} must be one of {sorted(SPACES)}, but got {got('model', name)}.")
    return SPACES[name]


def register_space(
    name: str,
    build: SpaceFunction,
    *,
    needs_scaling: bool = False,
    defaults: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Space:
    """Register ``build`` (``trial -> unfitted estimator``) under ``name``.

    ``defaults`` (optional) maps every parameter ``build`` suggests to the value a study starts
    from (see :meth:`FairObjective.enqueue_defaults
    <fairtune.tuning.FairObjective.enqueue_defaults>`); a taken ``name`` needs ``overwrite``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty string, but got name={name!r}.")
    if not callable(build):
        raise ValueError(f"`build` must be callable (trial -> estimator), but got {build!r}.")
    if name in SPACES and not overwrite:
        raise ValueError(
            f"`name` {name!r} is already registered; pass overwrite=True to replace it.")
    if defaults is not None and not isinstance(defaults, Mapping):
        raise ValueError(
            f"`defaults` must be a mapping of parameter names to values, but got {defaults!r}.")
    SPACES[name] = Space(name, build, needs_scaling=needs_scaling,
                         defaults=None if defaults is None else dict(defaults))
    return SPACES[name]
