"""FEMNIST (LEAF, Caldas et al. 2018): handwritten characters grouped by writer, as a federated
dataset, and an embedded stand-in built from scikit-learn's bundled digits.

Formats read from ``<data_home>/femnist/`` (the first one found, in this order):

* ``tff``: TensorFlow Federated's HDF5 files ``fed_emnist_{train,test}.h5`` (62 classes) or
  ``fed_emnist_digitsonly_{train,test}.h5`` (digits): groups ``/examples/<client_id>`` with
  datasets ``pixels`` (n, 28, 28) in [0, 1], 1.0 the background, and ``label`` (n,);
* ``leaf``: LEAF's JSON shards ``train/*.json`` and ``test/*.json`` (also under ``data/``), each
  ``{"users": [...], "num_samples": [...], "user_data": {id: {"x": [[784 floats]], "y": [...]}}}``
  with x row-major in [0, 1], 1.0 the background;
* ``parquet``: the Hugging Face files of ``flwrlabs/femnist`` (any ``*.parquet`` below the
  folder), columns ``image`` (PNG bytes), ``writer_id`` and ``character`` (the class index, or
  the character itself).

Pixel convention in memory, whatever the source: float32 in [0, 1] with **0.0 the background and
1.0 the ink** (MNIST's convention; TFF and LEAF store the inverse, ``1 - x``). PNG images are
scaled to [0, 1] and inverted when most of their pixels are bright (a light background).

A writer present in several files has all its examples under one id, train files first.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from fairtune._names import check_choice, check_fraction, check_integer
from fairtune.datasets._base import (
    ChecksumError,
    _checksum_message,
    _fetch_remote,
    _sha256,
    get_data_home,
)

__all__ = [
    "FEMNIST_LABEL_NAMES",
    "FederatedDataset",
    "TenantData",
    "federated_digits",
    "fetch_femnist",
]

#: Class index -> character: digits, then upper case, then lower case (LEAF's and TFF's order).
FEMNIST_LABEL_NAMES: tuple[str, ...] = tuple(
    [str(i) for i in range(10)]
    + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
)
_N_CLASSES = len(FEMNIST_LABEL_NAMES)  # 62
_SIDE = 28
_FORMATS = ("auto", "tff", "leaf", "parquet")

# TensorFlow Federated's archives: only_digits -> (file prefix, SHA-256 of the .tar.bz2 archive).
# Module attributes so that tests can point them at a local server and a generated archive.
_TFF_URL = "https://storage.googleapis.com/tff-datasets-public/"
_RETRY_DELAY = 1.0  # seconds between download attempts
_TFF_ARCHIVES: dict[bool, tuple[str, str]] = {
    True: (
        "fed_emnist_digitsonly",
        "55333deb8546765427c385710ca5e7301e16f4ed8b60c1dc5ae224b42bd5b14b",
    ),
    False: (
        "fed_emnist",
        "fe1ed5a502cea3a952eb105920bff8cffb32836b5173cb18a57a32c3606f3ea0",
    ),
}

def _require(module: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = {"PIL": "pillow"}.get(module, module)
        raise ImportError(f"Reading FEMNIST's {what} files needs {package}, which is not "
                          'installed. Install the optional dependencies with: pip install '
                          '"fairtune[femnist]"') from e


@dataclass(frozen=True)
class TenantData:
    """One tenant's share of a federated dataset: its writers' examples, split per writer.

    Attributes:
        name: The tenant's name (``"t0"``, ``"t1"``, ...).
        writers: The ids of its writers.
        X_train: Training images, (n_train, height, width) float32, 0.0 the background.
        y_train: Training labels, (n_train,) int64.
        X_valid: Validation images, (n_valid, height, width) float32.
        y_valid: Validation labels, (n_valid,) int64.
        n_classes: Number of classes of the dataset (62 for FEMNIST, 10 for digits).
    """

    name: str
    writers: tuple[str, ...]
    X_train: np.ndarray
    y_train: np.ndarray
    X_valid: np.ndarray
    y_valid: np.ndarray
    n_classes: int

    def __repr__(self) -> str:
        return (
            f"TenantData(name={self.name!r}, writers={len(self.writers)}, "
            f"train={len(self.y_train)}, valid={len(self.y_valid)})"
        )


class FederatedDataset:
    """Examples grouped by writer (client), with a way to group writers into tenants.

    Attributes:
        name: ``"femnist"``, ``"femnist_digits"`` or ``"digits"`` (the embedded stand-in).
        writers: The writer ids, sorted.
        label_names: Class index -> character (for FEMNIST: 0-9, A-Z, a-z, LEAF's order).
        DESCR: Where the data comes from, and its pixel convention.
        source: The format read (``"tff"``, ``"leaf"``, ``"parquet"``, ``"sklearn"``) and the
            files.

    Example:
        >>> from fairtune.datasets import federated_digits
        >>> data = federated_digits(n_writers=20)
        >>> tenants = data.partition(n_tenants=2, writers_per_tenant=5, seed=0)
        >>> sorted(tenants), tenants["t0"].X_train.shape[1:]
        (['t0', 't1'], (8, 8))
    """

    def __init__(
        self,
        *,
        name: str,
        images: Mapping[str, np.ndarray],
        labels: Mapping[str, np.ndarray],
        label_names: Sequence[str],
        DESCR: str,
        source: str,
    ) -> None:
        if set(images) != set(labels):
            raise ValueError("`images` and `labels` must have the same writers.")
        self.name = name
        self.writers: list[str] = sorted(labels)
        self.label_names: tuple[str, ...] = tuple(label_names)
        self.DESCR = DESCR
        self.source = source
        self._images = images
        self._labels = {w: np.asarray(labels[w], dtype=np.int64) for w in self.writers}

    def __len__(self) -> int:
        return len(self.writers)

    def __repr__(self) -> str:
        return (
            f"FederatedDataset(name={self.name!r}, writers={len(self.writers)}, "
            f"examples={self.n_examples}, classes={len(self.label_names)})"
        )

    @property
    def n_examples(self) -> int:
        """Number of examples over all writers."""
        return int(sum(len(v) for v in self._labels.values()))

    def examples(self, writer: str) -> tuple[np.ndarray, np.ndarray]:
        """One writer's images (n, height, width) float32 and labels (n,) int64."""
        if writer not in self._labels:
            raise KeyError(f"`writer` must be one of the dataset's writers, but got {writer!r}.")
        return np.asarray(self._images[writer], dtype=np.float32), self._labels[writer]

    def partition(
        self,
        *,
        n_tenants: int = 10,
        writers_per_tenant: int = 10,
        validation_fraction: float = 0.2,
        seed: int = 0,
    ) -> dict[str, TenantData]:
        """Group ``n_tenants * writers_per_tenant`` distinct writers into tenants.

        No two tenants share a writer; ``validation_fraction`` of each writer's examples (at
        least one, and at least one left for training) go to validation.

        Args:
            n_tenants: Number of tenants. Defaults to 10 (Sim et al. 2021).
            writers_per_tenant: Writers per tenant. Defaults to 10 (Sim et al. 2021).
            validation_fraction: Share of each writer's examples used for validation, in
                (0, 1). Defaults to 0.2.
            seed: Seed of the draw and of the splits. Defaults to 0.

        Returns:
            ``{"t0": TenantData, "t1": ...}`` in tenant order.
        """
        check_integer("n_tenants", n_tenants, minimum=1)
        check_integer("writers_per_tenant", writers_per_tenant, minimum=1)
        check_fraction("validation_fraction", validation_fraction)
        needed = n_tenants * writers_per_tenant
        if needed > len(self.writers):
            raise ValueError(
                f"`n_tenants * writers_per_tenant` must be at most the {len(self.writers)} "
                f"writers of the dataset, but got n_tenants={n_tenants}, "
                f"writers_per_tenant={writers_per_tenant} ({needed} writers)."
            )
        rng = np.random.RandomState(seed)
        chosen = [self.writers[i] for i in rng.permutation(len(self.writers))[:needed]]
        tenants: dict[str, TenantData] = {}
        for t in range(n_tenants):
            writers = tuple(chosen[t * writers_per_tenant:(t + 1) * writers_per_tenant])
            parts = []  # per writer: (X_train, y_train, X_valid, y_valid)
            for writer in writers:
                X, y = self.examples(writer)
                order = rng.permutation(len(y))
                n_valid = min(max(1, round(validation_fraction * len(y))), max(len(y) - 1, 1))
                valid, train = order[:n_valid], order[n_valid:]
                parts.append((X[train], y[train], X[valid], y[valid]))
            X_train, y_train, X_valid, y_valid = (
                np.concatenate(p) for p in zip(*parts, strict=True))
            tenants[f"t{t}"] = TenantData(f"t{t}", writers, X_train, y_train, X_valid, y_valid,
                                          n_classes=len(self.label_names))
        return tenants


# --------------------------------------------------------------------------------------------
# Readers (each returns images: writer -> array or lazy mapping, labels: writer -> array)
# --------------------------------------------------------------------------------------------


def _check_labels(y: np.ndarray, path: Path | str, writer: str) -> np.ndarray:
    y = np.asarray(y)
    integral = y.ndim == 1 and (not y.size or np.issubdtype(y.dtype, np.integer) or (
        np.issubdtype(y.dtype, np.floating) and bool(np.all(y == np.round(y)))))
    if not integral:
        raise ValueError(f"{path}: writer {writer!r} has labels that are not integers (dtype "
                         f"{y.dtype}, shape {y.shape}); FEMNIST labels are class indices 0..61.")
    if y.size and (y.min() < 0 or y.max() >= _N_CLASSES):
        raise ValueError(f"{path}: writer {writer!r} has labels outside 0..{_N_CLASSES - 1} (min "
                         f"{y.min()}, max {y.max()}); FEMNIST labels are class indices 0..61.")
    return y.astype(np.int64)


class _LazyH5Pixels(Mapping[str, np.ndarray]):
    """writer -> pixels read from the HDF5 files on access (the full set is ~2 GB as float32)."""

    def __init__(self, files: dict[str, list[Path]], keep: dict[str, list[np.ndarray | None]]):
        self._files = files  # writer -> files that hold it
        self._keep = keep  # writer -> boolean mask per file (None: all) after only_digits

    def __getitem__(self, writer: str) -> np.ndarray:
        h5py = _require("h5py", "HDF5")
        arrays = []
        for path, mask in zip(self._files[writer], self._keep[writer], strict=True):
            with h5py.File(path, "r") as f:
                pixels = np.asarray(f["examples"][writer]["pixels"][()], dtype=np.float32)
            arrays.append(pixels if mask is None else pixels[mask])
        return 1.0 - np.concatenate(arrays)  # TFF: 1.0 is the background

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def _read_tff(
    paths: Sequence[Path], only_digits: bool
) -> tuple[Mapping[str, np.ndarray], dict[str, np.ndarray], str]:
    h5py = _require("h5py", "HDF5")
    files: dict[str, list[Path]] = {}
    keep: dict[str, list[np.ndarray | None]] = {}
    labels: dict[str, list[np.ndarray]] = {}
    for path in paths:
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            raise ValueError(
                f"{path}: not a readable HDF5 file (truncated or corrupted download?): {e}. "
                "Delete it to download it again."
            ) from e
        with f:
            if "examples" not in f:
                raise ValueError(
                    f"{path}: no group '/examples'; expected TensorFlow Federated's FEMNIST "
                    "layout /examples/<client_id>/{pixels,label}."
                )
            for writer in f["examples"]:
                group = f["examples"][writer]
                if "pixels" not in group or "label" not in group:
                    raise ValueError(
                        f"{path}: /examples/{writer} must hold 'pixels' and 'label', but has "
                        f"{sorted(group)}."
                    )
                shape = group["pixels"].shape
                y = _check_labels(group["label"][()], path, writer)
                if len(shape) != 3 or shape[1:] != (_SIDE, _SIDE) or shape[0] != len(y):
                    raise ValueError(
                        f"{path}: writer {writer!r} has pixels of shape {shape} for {len(y)} "
                        f"labels; expected ({len(y)}, 28, 28)."
                    )
                mask = (y < 10) if only_digits else None
                files.setdefault(writer, []).append(path)
                keep.setdefault(writer, []).append(mask)
                labels.setdefault(writer, []).append(y if mask is None else y[mask])
    merged = {w: y for w, v in labels.items() if len(y := np.concatenate(v))}
    return (_LazyH5Pixels({w: files[w] for w in merged}, keep), merged,
            "tff: " + ", ".join(p.name for p in paths))


def _read_leaf(
    paths: Sequence[Path], only_digits: bool
) -> tuple[Mapping[str, np.ndarray], dict[str, np.ndarray], str]:
    images: dict[str, list[np.ndarray]] = {}
    labels: dict[str, list[np.ndarray]] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                shard = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not valid JSON (truncated download?): {e}") from e
        if not isinstance(shard, dict) or "user_data" not in shard:
            found = sorted(shard) if isinstance(shard, dict) else type(shard).__name__
            raise ValueError(
                f"{path}: a LEAF shard must have a 'user_data' key (with 'users' and "
                f"'num_samples'), but it has {found}."
            )
        for writer, data in shard["user_data"].items():
            if not isinstance(data, dict) or "x" not in data or "y" not in data:
                raise ValueError(f"{path}: user_data[{writer!r}] must have 'x' and 'y'.")
            y = _check_labels(np.asarray(data["y"]), path, writer)
            x = np.asarray(data["x"], dtype=np.float32)
            if x.ndim != 2 or x.shape != (len(y), _SIDE * _SIDE):
                raise ValueError(
                    f"{path}: user_data[{writer!r}]['x'] has shape {x.shape} for {len(y)} "
                    f"labels; expected ({len(y)}, 784) (28 x 28 pixels, row-major)."
                )
            x = 1.0 - x.reshape(-1, _SIDE, _SIDE)  # LEAF: 1.0 is the background
            if only_digits:
                x, y = x[y < 10], y[y < 10]
            images.setdefault(writer, []).append(x)
            labels.setdefault(writer, []).append(y)
    merged_y = {w: np.concatenate(v) for w, v in labels.items()}
    merged_x = {w: np.concatenate(images[w]) for w in merged_y if len(merged_y[w])}
    merged_y = {w: merged_y[w] for w in merged_x}
    return merged_x, merged_y, "leaf: " + ", ".join(str(p) for p in paths)


def _decode_png(data: bytes, path: Path, writer: str) -> np.ndarray:
    image_module = _require("PIL.Image", "parquet (PNG images)")
    try:
        image = image_module.open(io.BytesIO(data)).convert("L")
    except Exception as e:  # PIL raises several types for bad bytes
        raise ValueError(f"{path}: writer {writer!r} has an image that is not a PNG: {e}") from e
    if image.size != (_SIDE, _SIDE):
        image = image.resize((_SIDE, _SIDE))
    return np.asarray(image, dtype=np.float32) / 255.0


def _read_parquet(
    paths: Sequence[Path], only_digits: bool
) -> tuple[Mapping[str, np.ndarray], dict[str, np.ndarray], str]:
    pq = _require("pyarrow.parquet", "parquet")
    images: dict[str, list[np.ndarray]] = {}
    labels: dict[str, list[int]] = {}
    index = {c: i for i, c in enumerate(FEMNIST_LABEL_NAMES)}
    for path in paths:
        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises ArrowInvalid and OSError subclasses
            raise ValueError(f"{path}: not a readable parquet file: {e}") from e
        missing = {"image", "writer_id", "character"} - set(table.column_names)
        if missing:
            raise ValueError(
                f"{path}: the parquet file of flwrlabs/femnist must have the columns 'image', "
                f"'writer_id' and 'character', but misses {sorted(missing)} (has "
                f"{table.column_names})."
            )
        rows = table.select(["image", "writer_id", "character"]).to_pylist()
        for row in rows:
            writer = str(row["writer_id"])
            char = row["character"]
            if isinstance(char, str):
                if char not in index:
                    raise ValueError(
                        f"{path}: writer {writer!r} has an unknown character {char!r}."
                    )
                label = index[char]
            else:
                label = int(_check_labels(np.asarray([char]), path, writer)[0])
            if only_digits and label >= 10:
                continue
            image = row["image"]
            data = image.get("bytes") if isinstance(image, dict) else image
            if not isinstance(data, (bytes, bytearray)):
                raise ValueError(f"{path}: writer {writer!r} has an image without PNG bytes.")
            images.setdefault(writer, []).append(_decode_png(bytes(data), path, writer))
            labels.setdefault(writer, []).append(label)
    stacked = {w: np.stack(v) for w, v in images.items()}
    # Ink is the minority of a character's pixels: a bright median means a white background.
    if stacked and float(np.median(np.concatenate([v.ravel() for v in stacked.values()]))) > 0.5:
        stacked = {w: 1.0 - v for w, v in stacked.items()}
    return (
        stacked,
        {w: np.asarray(v, dtype=np.int64) for w, v in labels.items()},
        "parquet: " + ", ".join(str(p) for p in paths),
    )


# --------------------------------------------------------------------------------------------
# Finding the files, downloading
# --------------------------------------------------------------------------------------------


def _find(folder: Path, fmt: str, only_digits: bool) -> tuple[str, list[Path]] | None:
    prefixes = ["fed_emnist_digitsonly", "fed_emnist"] if only_digits else ["fed_emnist"]
    candidates = {  # each format's files, first found first
        "tff": [[folder / f"{p}_{split}.h5" for split in ("train", "test")] for p in prefixes],
        "leaf": [sorted((root / "train").glob("*.json")) + sorted((root / "test").glob("*.json"))
                 for root in (folder, folder / "data")],
        "parquet": [sorted(p for p in folder.rglob("*.parquet") if p.is_file())],
    }
    for name in ([fmt] if fmt != "auto" else ["tff", "leaf", "parquet"]):
        for paths in candidates[name] if folder.is_dir() else []:
            if paths and all(p.is_file() for p in paths):
                return name, paths
    return None


def _download_tff(folder: Path, only_digits: bool, *, progress: bool) -> None:
    """Fetch TFF's archive (verified), extract its two .h5 files atomically, drop the archive."""
    prefix, sha256 = _TFF_ARCHIVES[only_digits]
    archive = folder / f"{prefix}.tar.bz2"
    if archive.is_file() and _sha256(archive) != sha256:
        os.remove(archive)  # a stale or corrupted archive is downloaded again
    if not archive.is_file():
        _fetch_remote(
            _TFF_URL + archive.name, archive, sha256, delay=_RETRY_DELAY, progress=progress
        )
    wanted = {f"{prefix}_{split}.h5" for split in ("train", "test")}
    tmp = Path(tempfile.mkdtemp(prefix=".extract.", dir=folder))
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                members = {os.path.basename(m.name): m for m in tar.getmembers()
                           if os.path.basename(m.name) in wanted and m.isfile()}
                if set(members) != wanted:
                    raise ValueError(
                        f"{archive}: the archive must hold {sorted(wanted)}, but holds "
                        f"{sorted(m.name for m in tar.getmembers())}."
                    )
                for base, member in members.items():
                    source = tar.extractfile(member)
                    assert source is not None  # a regular file
                    with source, open(tmp / base, "wb") as out:
                        shutil.copyfileobj(source, out)
        except (tarfile.TarError, EOFError, OSError) as e:
            os.remove(archive)
            raise ChecksumError(
                _checksum_message(archive, sha256, f"<unreadable archive: {e}>")
            ) from e
        for base in sorted(wanted):
            os.replace(tmp / base, folder / base)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    os.remove(archive)


def fetch_femnist(
    *,
    data_home: str | os.PathLike[str] | None = None,
    download_if_missing: bool = True,
    only_digits: bool = False,
    file_format: Literal["auto", "tff", "leaf", "parquet"] = "auto",
    progress: bool = True,
) -> FederatedDataset:
    """Load FEMNIST (LEAF, Caldas et al. 2018) from ``<data_home>/femnist/``, downloading it if
    needed: 28 x 28 handwritten characters (62 classes) of about 3,500 writers.

    The format is recognised from what is in the folder (see the module docstring); when none
    is there, TensorFlow Federated's archive is downloaded, checked against its published
    SHA-256 and its ``.h5`` files moved into place atomically. HDF5 and parquet need
    ``pip install "fairtune[femnist]"``.

    Args:
        data_home: Folder of the data cache. Defaults to ``FAIRTUNE_DATA`` or
            ``~/fairtune_data`` (see :func:`get_data_home`).
        download_if_missing: Download TFF's files when no format is found. Defaults to True.
        only_digits: Keep the digits 0-9 only. Defaults to False.
        file_format: ``"auto"``, ``"tff"``, ``"leaf"`` or ``"parquet"``. Defaults to ``"auto"``.
        progress: Show a progress bar while downloading. Defaults to True.

    Returns:
        A :class:`FederatedDataset` (``name`` ``"femnist"``, or ``"femnist_digits"``).

    Raises:
        FileNotFoundError: No FEMNIST files and ``download_if_missing=False``.
        ValueError: A file that is not in the format it claims, naming the file.
        ChecksumError: The downloaded archive does not match the published SHA-256.
        ImportError: An optional dependency is missing (the message names the extra).
    """
    check_choice("file_format", file_format, _FORMATS)
    folder = get_data_home(data_home) / "femnist"
    found = _find(folder, file_format, only_digits)
    if found is None and file_format in ("auto", "tff"):
        if not download_if_missing:
            raise FileNotFoundError(
                f"No FEMNIST files in {folder} (looked for TensorFlow Federated's "
                "fed_emnist[_digitsonly]_{train,test}.h5, LEAF's train/*.json and test/*.json, "
                "and flwrlabs/femnist *.parquet); pass download_if_missing=True to download "
                "TensorFlow Federated's files."
            )
        folder.mkdir(parents=True, exist_ok=True)
        _download_tff(folder, only_digits, progress=progress)
        found = _find(folder, "tff", only_digits)
    if found is None:
        raise FileNotFoundError(f"No FEMNIST files of format {file_format!r} in {folder}.")
    fmt, paths = found
    reader = {"tff": _read_tff, "leaf": _read_leaf, "parquet": _read_parquet}[fmt]
    images, labels, source = reader(paths, only_digits)
    name = "femnist_digits" if only_digits else "femnist"
    descr = (
        f"FEMNIST (LEAF, Caldas et al. 2018), {'digits only' if only_digits else '62 classes'}, "
        f"grouped by writer: {len(labels)} writers read from {folder} ({fmt}). Images 28 x 28 "
        "float32 in [0, 1], 0.0 the background (inverted from the source). Labels: "
        "0-9, A-Z, a-z (LEAF's order)."
    )
    label_names = FEMNIST_LABEL_NAMES[:10] if only_digits else FEMNIST_LABEL_NAMES
    return FederatedDataset(
        name=name, images=images, labels=labels, label_names=label_names, DESCR=descr,
        source=source,
    )


def federated_digits(*, n_writers: int = 100, seed: int = 0) -> FederatedDataset:
    """scikit-learn's bundled handwritten digits (1,797 images, 8 x 8) dealt to ``n_writers``
    pseudo-writers: an embedded stand-in for FEMNIST that needs no download.

    The "writers" are a seeded random split, not real writers (the bundle does not say who
    wrote which): the tenants' data are alike, unlike FEMNIST's.

    Args:
        n_writers: Number of pseudo-writers (about 1797 / n_writers images each). Defaults to
            100 (10 tenants x 10 writers).
        seed: Seed of the split. Defaults to 0.

    Returns:
        A :class:`FederatedDataset` named ``"digits"`` with writers ``"w000"``, ``"w001"``, ...
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    n = len(digits.target)
    if not isinstance(n_writers, (int, np.integer)) or not 1 <= n_writers <= n:
        raise ValueError(f"`n_writers` must be in 1..{n}, but got n_writers={n_writers!r}.")
    images = (digits.images / 16.0).astype(np.float32)
    order = np.random.RandomState(seed).permutation(n)
    width = max(len(str(n_writers - 1)), 3)
    rows = {f"w{i:0{width}d}": idx for i, idx in enumerate(np.array_split(order, n_writers))}
    return FederatedDataset(
        name="digits",
        images={writer: images[idx] for writer, idx in rows.items()},
        labels={writer: digits.target[idx] for writer, idx in rows.items()},
        label_names=[str(i) for i in range(10)],
        DESCR=(
            "scikit-learn's bundled digits (UCI optdigits test set: 1,797 images of 8 x 8, "
            f"real handwriting) dealt at random (seed {seed}) to {n_writers} pseudo-writers. "
            "NOT split by writer: a stand-in for FEMNIST that runs anywhere."
        ),
        source="sklearn: sklearn.datasets.load_digits",
    )

