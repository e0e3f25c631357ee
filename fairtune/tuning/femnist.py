"""The network of the collaborative FEMNIST experiment: a CNN, its 3-parameter space and the
objective of tenants who tune it on their writers' images (the tenants of
:func:`fairtune.datasets.fetch_femnist`): ``from fairtune.tuning.femnist import
CNNClassifier, CNNTenantObjective, cnn_space``.

Sim, Zhang, Low and Jaillet (ICML 2021, "Collaborative Bayesian Optimization with Fair Regret",
section 5) let n = 10 parties, each holding the handwriting of 10 FEMNIST writers, tune a CNN
together: learning rate, learning-rate decay and L2 regularization, each in [1e-5, 1], the
output being validation accuracy. The paper does not give the architecture; this one is LEAF's
FEMNIST CNN (Caldas et al. 2018) with configurable widths:

    conv 5x5 (c_1 channels, same padding) -> ReLU -> max-pool 2
    -> conv 5x5 (c_2) -> ReLU -> max-pool 2 -> dense (h) -> ReLU -> dense (classes)

LEAF uses c = (32, 64), h = 2048 (the defaults); smaller widths train faster on a CPU.
Training is plain SGD on the cross-entropy (:class:`CNNClassifier`); torch is imported when a
network is built or trained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fairtune._keys import CNN_DIVERGED_KEY
from fairtune._names import check_integer, check_number
from fairtune._threads import limit_training_threads

if TYPE_CHECKING:
    import optuna

    from fairtune.datasets import TenantData

__all__ = [
    "CNN_PARAMS",
    "CNNClassifier",
    "CNNTenantObjective",
    "cnn_space",
]

#: name -> (low, high) of the log-uniform search space of Sim et al. 2021, section 5.
CNN_PARAMS: dict[str, tuple[float, float]] = {
    "learning_rate": (1e-5, 1.0),
    "lr_decay": (1e-5, 1.0),
    "l2": (1e-5, 1.0),
}


def _build_network(
    height: int, width: int, n_classes: int, channels: tuple[int, int], hidden: int
) -> Any:
    import torch.nn as nn

    c1, c2 = channels
    flat = c2 * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(1, c1, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, hidden),
        nn.ReLU(),
        nn.Linear(hidden, n_classes),
    )


class CNNClassifier:
    """LEAF's FEMNIST CNN trained by SGD, with the scikit-learn ``fit`` / ``predict`` / ``score``
    interface. Deterministic given ``random_state`` (initial weights and batch order). A run
    whose loss becomes non-finite stops; the diverged network predicts class 0 everywhere.

    Args:
        learning_rate: SGD step size at step 0. Defaults to 0.05.
        lr_decay: Keras's inverse-time decay, ``lr_k = learning_rate / (1 + lr_decay * k)`` at
            optimizer step k. Defaults to 1e-3.
        l2: Weight decay (L2 regularization ``l2 / 2 * ||w||^2``). Defaults to 1e-4.
        epochs: Passes over the training images. Defaults to 5.
        batch_size: Images per SGD step. Defaults to 32.
        channels: Channels of the two convolutions. Defaults to (32, 64) (LEAF).
        hidden: Width of the dense layer. Defaults to 2048 (LEAF).
        n_classes: Number of outputs; None uses ``max(y) + 1`` of the training labels.
            Defaults to None.
        random_state: Seed of the initial weights and of the batch order. Defaults to 0.

    Example:
        >>> import numpy as np
        >>> from fairtune.tuning.femnist import CNNClassifier
        >>> X = np.zeros((20, 8, 8), dtype=np.float32); y = np.arange(20) % 2
        >>> X[y == 1, 2:6, 3:5] = 1.0
        >>> clf = CNNClassifier(learning_rate=0.1, epochs=20, channels=(4, 8), hidden=16)
        >>> clf.fit(X, y).score(X, y)
        1.0
    """

    def __init__(
        self,
        *,
        learning_rate: float = 0.05,
        lr_decay: float = 1e-3,
        l2: float = 1e-4,
        epochs: int = 5,
        batch_size: int = 32,
        channels: Sequence[int] = (32, 64),
        hidden: int = 2048,
        n_classes: int | None = None,
        random_state: int = 0,
    ) -> None:
        for name, value in (("learning_rate", learning_rate), ("lr_decay", lr_decay),
                            ("l2", l2)):
            check_number(name, value, low=0.0)
        for name, value in (("epochs", epochs), ("batch_size", batch_size), ("hidden", hidden)):
            check_integer(name, value, minimum=1)
        channels = tuple(channels)
        if len(channels) != 2 or not all(isinstance(c, (int, np.integer)) and c >= 1
                                         for c in channels):
            raise ValueError(
                f"`channels` must be two positive integers, but got channels={channels!r}."
            )
        if n_classes is not None and (not isinstance(n_classes, (int, np.integer))
                                      or n_classes < 2):
            raise ValueError(
                f"`n_classes` must be an integer >= 2, but got n_classes={n_classes!r}."
            )
        self.learning_rate = float(learning_rate)
        self.lr_decay = float(lr_decay)
        self.l2 = float(l2)
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.channels = (int(channels[0]), int(channels[1]))
        self.hidden = int(hidden)
        self.n_classes = n_classes
        self.random_state = random_state

    def __repr__(self) -> str:
        return (
            f"CNNClassifier(learning_rate={self.learning_rate:.3g}, lr_decay={self.lr_decay:.3g}, "
            f"l2={self.l2:.3g}, epochs={self.epochs}, channels={self.channels}, "
            f"hidden={self.hidden})"
        )

    @staticmethod
    def _images(X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 3 or X.shape[1] < 4 or X.shape[2] < 4:
            raise ValueError(
                f"`X` must be images of shape (n, height, width) with sides >= 4, but got an "
                f"array of shape {X.shape}."
            )
        return X

    def fit(self, X: np.ndarray, y: np.ndarray) -> CNNClassifier:
        """Train on images ``X`` (n, height, width) and integer labels ``y`` (n,)."""
        import torch

        X = self._images(X)
        y = np.asarray(y)
        if y.shape != (len(X),) or (len(y) and (y.min() < 0)):
            raise ValueError(
                f"`y` must hold one non-negative integer label per image ({len(X)}), but got "
                f"shape {y.shape}."
            )
        n_classes = self.n_classes if self.n_classes is not None else int(y.max()) + 1
        if len(y) and y.max() >= n_classes:
            raise ValueError(
                f"`y` has label {int(y.max())}, but the network has n_classes={n_classes}."
            )
        self.n_classes_ = max(n_classes, 2)
        self.image_shape_ = X.shape[1:]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.random_state)
            height, width = self.image_shape_
            network = _build_network(height, width, self.n_classes_, self.channels, self.hidden)
        inputs = torch.from_numpy(X).unsqueeze(1)  # (n, 1, height, width)
        targets = torch.from_numpy(y.astype(np.int64))
        optimizer = torch.optim.SGD(network.parameters(), lr=self.learning_rate,
                                    weight_decay=self.l2)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda k: 1.0 / (1.0 + self.lr_decay * k)
        )
        loss_fn = torch.nn.CrossEntropyLoss()
        generator = torch.Generator().manual_seed(self.random_state)
        self.diverged_ = False
        network.train()
        with limit_training_threads():
            for _ in range(self.epochs):
                order = torch.randperm(len(targets), generator=generator)
                for start in range(0, len(targets), self.batch_size):
                    batch = order[start:start + self.batch_size]
                    optimizer.zero_grad()
                    loss = loss_fn(network(inputs[batch]), targets[batch])
                    if not torch.isfinite(loss):
                        self.diverged_ = True
                        break
                    loss.backward()
                    optimizer.step()
                    scheduler.step()
                if self.diverged_:
                    break
        network.eval()
        self.network_ = network
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted class of each image (class 0 everywhere if training diverged)."""
        import torch

        if not hasattr(self, "network_"):
            raise RuntimeError("This CNNClassifier is not fitted yet; call fit(X, y) first.")
        X = self._images(X)
        if X.shape[1:] != self.image_shape_:
            raise ValueError(
                f"`X` must have images of shape {self.image_shape_} (as in fit), but got "
                f"{X.shape[1:]}."
            )
        if self.diverged_:
            return np.zeros(len(X), dtype=np.int64)
        with torch.no_grad(), limit_training_threads():
            logits = self.network_(torch.from_numpy(X).unsqueeze(1))
            logits = torch.nan_to_num(logits, nan=0.0, posinf=0.0, neginf=0.0)
        return logits.argmax(dim=1).numpy().astype(np.int64)

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        """Accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))


def _suggest(trial: optuna.Trial) -> dict[str, float]:
    return {
        name: trial.suggest_float(name, low, high, log=True)
        for name, (low, high) in CNN_PARAMS.items()
    }


def cnn_space(trial: optuna.Trial, *, random_state: int = 0, **kwargs: Any) -> CNNClassifier:
    """The 3-parameter space of Sim et al. 2021: ``learning_rate``, ``lr_decay`` and ``l2``,
    each log-uniform in [1e-5, 1], as a function ``trial -> unfitted CNNClassifier``.

    Args:
        trial: The Optuna trial that suggests the three parameters.
        random_state: Seed of the network. Defaults to 0.
        **kwargs: Other :class:`CNNClassifier` arguments (``epochs``, ``channels``, ...).
    """
    suggested: dict[str, Any] = _suggest(trial)  # float keyword arguments, by name
    return CNNClassifier(**suggested, random_state=random_state, **kwargs)


class CNNTenantObjective:
    """Optuna objective of one tenant: train the CNN on its writers' training images with the
    trial's ``learning_rate``, ``lr_decay`` and ``l2``, return its validation accuracy.

    Pass one :class:`fairtune.datasets.TenantData` (the objective of that tenant), or the
    mapping ``tenant -> TenantData`` of :meth:`FederatedDataset.partition`: then each trial is
    evaluated on the data of the tenant it belongs to (:func:`fairtune.tenancy.tenant_of`, read
    after the first ``suggest``, when :class:`~fairtune.samplers.CollaborativeUCBSampler` has
    tagged it), so that a collaborative study is a few lines:

    .. code-block:: python

        import optuna
        from fairtune.datasets import federated_digits
        from fairtune.samplers import CollaborativeUCBSampler
        from fairtune.tuning.femnist import CNNTenantObjective

        tenants = federated_digits().partition(n_tenants=10, writers_per_tenant=10, seed=0)
        sampler = CollaborativeUCBSampler(tenants=list(tenants), rho=0.5, n_startup_rounds=2)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.optimize(CNNTenantObjective(tenants), n_trials=10 * 8)  # 8 rounds

    The network's seed is the same for every trial (common random numbers), so a tenant's
    accuracy is a deterministic function of the three parameters. Each trial records
    ``"fairtune:cnn_diverged"`` (whether the loss became non-finite) as a user attribute.

    Args:
        tenants: One tenant's data, or the mapping tenant name -> data.
        epochs, batch_size, channels, hidden: As :class:`CNNClassifier` (same defaults).
        seed: Seed of the network and the batch order. Defaults to 0.
    """

    def __init__(
        self,
        tenants: TenantData | Mapping[str, TenantData],
        *,
        epochs: int = 5,
        batch_size: int = 32,
        channels: Sequence[int] = (32, 64),
        hidden: int = 2048,
        seed: int = 0,
    ) -> None:
        from fairtune.datasets import TenantData

        if isinstance(tenants, TenantData):
            self._single: TenantData | None = tenants
            self._tenants: dict[str, TenantData] = {tenants.name: tenants}
        elif isinstance(tenants, Mapping) and tenants and all(
            isinstance(v, TenantData) for v in tenants.values()
        ):
            self._single = None
            self._tenants = dict(tenants)
        else:
            raise ValueError(
                "`tenants` must be a TenantData or a non-empty mapping of tenant names to "
                f"TenantData (FederatedDataset.partition), but got tenants={tenants!r}."
            )
        # Validate the training settings once, with the classifier's own messages.
        CNNClassifier(epochs=epochs, batch_size=batch_size, channels=channels, hidden=hidden)
        self.epochs = epochs
        self.batch_size = batch_size
        self.channels = tuple(channels)
        self.hidden = hidden
        self.seed = seed

    @property
    def tenants(self) -> list[str]:
        """The tenants' names."""
        return list(self._tenants)

    def classifier(self, params: Mapping[str, float], data: TenantData) -> CNNClassifier:
        """The unfitted classifier of one evaluation."""
        return CNNClassifier(
            **params, epochs=self.epochs, batch_size=self.batch_size, channels=self.channels,
            hidden=self.hidden, n_classes=data.n_classes, random_state=self.seed,
        )

    def __call__(self, trial: optuna.Trial) -> float:
        from fairtune.tenancy import tenant_of

        params = _suggest(trial)  # the first suggest assigns an untagged trial's tenant
        if self._single is not None:
            data = self._single
        else:
            tenant = tenant_of(trial)
            if tenant not in self._tenants:
                raise ValueError(
                    f"trial {trial.number} belongs to tenant {tenant!r}, which must be one of "
                    f"{self.tenants}; tag it with fairtune.tenancy.ask or use "
                    "CollaborativeUCBSampler(tenants=...) with the same names."
                )
            data = self._tenants[tenant]
        model = self.classifier(params, data).fit(data.X_train, data.y_train)
        trial.set_user_attr(CNN_DIVERGED_KEY, bool(model.diverged_))
        return model.score(data.X_valid, data.y_valid)
