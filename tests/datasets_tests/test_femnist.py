"""FEMNIST: each reader on tiny files written here in its real format, bad files, the download
path against a local HTTP server, and the partition into tenants.

Images are built in memory with the ink convention (0.0 background, 1.0 ink) and written in each
source's own convention (TFF and LEAF: 1.0 background; parquet: white-background PNG), so that
every test also checks the conversion back.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from fairtune.datasets import (
    FEMNIST_LABEL_NAMES,
    ChecksumError,
    FederatedDataset,
    federated_digits,
    fetch_femnist,
)
from fairtune.datasets import _femnist


def _ink(label: int, k: int) -> np.ndarray:
    """A 28 x 28 image in the in-memory convention: a bar whose rows and column encode it."""
    img = np.zeros((28, 28), dtype=np.float32)
    img[label % 28, :] = 1.0
    img[:, (label + 3 * k) % 28] = 0.5
    return img


# writer -> [(label, k)] for the train and test files; "w1" is in both.
TRAIN = {"w0": [(0, 0), (11, 1), (61, 2)], "w1": [(5, 0), (36, 1)], "w2": [(9, 0)]}
TEST = {"w1": [(7, 2)], "w3": [(12, 0), (3, 1)]}


def _expected(writer: str, only_digits: bool = False) -> tuple[np.ndarray, np.ndarray]:
    pairs = TRAIN.get(writer, []) + TEST.get(writer, [])  # train files first
    pairs = [p for p in pairs if not only_digits or p[0] < 10]
    return np.stack([_ink(label, k) for label, k in pairs]), np.array([p[0] for p in pairs])


def _write_h5(path: Path, split: dict[str, list[tuple[int, int]]], **overrides: Any) -> None:
    with h5py.File(path, "w") as f:
        f.create_group("examples")
        for writer, pairs in split.items():
            group = f.create_group(f"examples/{writer}")
            group["pixels"] = 1.0 - np.stack([_ink(lab, k) for lab, k in pairs])
            group["label"] = np.array(overrides.get("labels", [lab for lab, _ in pairs]),
                                      dtype=np.int32)


def _write_tff(folder: Path, prefix: str = "fed_emnist") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _write_h5(folder / f"{prefix}_train.h5", TRAIN)
    _write_h5(folder / f"{prefix}_test.h5", TEST)


def _leaf_shard(split: dict[str, list[tuple[int, int]]]) -> dict[str, Any]:
    return {
        "users": list(split),
        "num_samples": [len(v) for v in split.values()],
        "user_data": {
            w: {"x": [(1.0 - _ink(lab, k)).ravel().tolist() for lab, k in pairs],
                "y": [lab for lab, _ in pairs]}
            for w, pairs in split.items()
        },
    }


def _write_leaf(folder: Path) -> None:
    (folder / "train").mkdir(parents=True)
    (folder / "test").mkdir()
    # The train split over two shards, as LEAF writes it.
    first = {"w0": TRAIN["w0"]}
    second = {w: v for w, v in TRAIN.items() if w != "w0"}
    (folder / "train" / "all_data_0_train.json").write_text(json.dumps(_leaf_shard(first)))
    (folder / "train" / "all_data_1_train.json").write_text(json.dumps(_leaf_shard(second)))
    (folder / "test" / "all_data_0_test.json").write_text(json.dumps(_leaf_shard(TEST)))


def _png(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.round((1.0 - img) * 255).astype(np.uint8), mode="L").save(buf, "PNG")
    return buf.getvalue()


def _write_parquet(folder: Path, as_characters: bool = False) -> None:
    (folder / "data").mkdir(parents=True)
    for i, split in enumerate((TRAIN, TEST)):
        rows = [(w, lab, k) for w, pairs in split.items() for lab, k in pairs]
        table = pa.table({
            "image": [{"bytes": _png(_ink(lab, k)), "path": None} for _, lab, k in rows],
            "writer_id": [w for w, _, _ in rows],
            "hsf_id": [0 for _ in rows],
            "character": [FEMNIST_LABEL_NAMES[lab] if as_characters else lab
                          for _, lab, _ in rows],
        })
        pq.write_table(table, folder / "data" / f"train-0000{i}-of-00002.parquet")


def _check(data: FederatedDataset, only_digits: bool = False, atol: float = 1e-6) -> None:
    writers = sorted(w for w in {*TRAIN, *TEST} if len(_expected(w, only_digits)[1]) > 0) \
        if not only_digits else sorted(
            w for w in {*TRAIN, *TEST}
            if any(lab < 10 for lab, _ in TRAIN.get(w, []) + TEST.get(w, [])))
    assert data.writers == writers
    for writer in writers:
        X, y = data.examples(writer)
        X_exp, y_exp = _expected(writer, only_digits)
        assert X.dtype == np.float32 and X.shape == X_exp.shape
        np.testing.assert_allclose(X, X_exp, atol=atol)
        np.testing.assert_array_equal(y, y_exp)
    assert data.n_examples == sum(len(_expected(w, only_digits)[1]) for w in writers)


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------


def test_label_names_are_leaf_order() -> None:
    assert len(FEMNIST_LABEL_NAMES) == 62
    assert FEMNIST_LABEL_NAMES[:11] == tuple("0123456789A")
    assert FEMNIST_LABEL_NAMES[35:37] == ("Z", "a") and FEMNIST_LABEL_NAMES[61] == "z"


def test_reads_tff_hdf5(tmp_path: Path) -> None:
    _write_tff(tmp_path / "femnist")
    data = fetch_femnist(data_home=tmp_path, download_if_missing=False)
    _check(data)
    assert data.name == "femnist" and data.label_names == FEMNIST_LABEL_NAMES
    assert data.source.startswith("tff")
    digits = fetch_femnist(data_home=tmp_path, download_if_missing=False, only_digits=True)
    _check(digits, only_digits=True)
    assert digits.label_names == FEMNIST_LABEL_NAMES[:10]


def test_tff_digits_only_files_are_preferred_for_only_digits(tmp_path: Path) -> None:
    _write_tff(tmp_path / "femnist")
    only = {"w9": [(4, 0)]}
    _write_h5(tmp_path / "femnist" / "fed_emnist_digitsonly_train.h5", only)
    _write_h5(tmp_path / "femnist" / "fed_emnist_digitsonly_test.h5", {})
    data = fetch_femnist(data_home=tmp_path, download_if_missing=False, only_digits=True)
    assert data.writers == ["w9"]
    assert "digitsonly" in data.source


def test_reads_leaf_json_shards(tmp_path: Path) -> None:
    _write_leaf(tmp_path / "femnist")
    data = fetch_femnist(data_home=tmp_path, download_if_missing=False)
    _check(data)  # w0 from the first shard, w1 from the second and from test
    assert data.source.startswith("leaf")


def test_reads_leaf_tree_under_data_folder(tmp_path: Path) -> None:
    _write_leaf(tmp_path / "femnist" / "data")
    _check(fetch_femnist(data_home=tmp_path, download_if_missing=False, only_digits=True),
           only_digits=True)


@pytest.mark.parametrize("as_characters", [False, True])
def test_reads_flwrlabs_parquet(tmp_path: Path, as_characters: bool) -> None:
    _write_parquet(tmp_path / "femnist", as_characters=as_characters)
    data = fetch_femnist(data_home=tmp_path, download_if_missing=False)
    _check(data, atol=1 / 255)  # 8-bit PNG
    assert data.source.startswith("parquet")


def test_format_choice_auto_prefers_tff_and_can_be_forced(tmp_path: Path) -> None:
    _write_tff(tmp_path / "femnist")
    _write_leaf(tmp_path / "femnist")
    assert fetch_femnist(data_home=tmp_path, download_if_missing=False).source.startswith("tff")
    forced = fetch_femnist(data_home=tmp_path, download_if_missing=False, file_format="leaf")
    assert forced.source.startswith("leaf")
    with pytest.raises(FileNotFoundError, match="'parquet'"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False, file_format="parquet")
    with pytest.raises(ValueError, match=r"`file_format` must be one of \['auto'"):
        fetch_femnist(data_home=tmp_path, file_format="csv")  # type: ignore[arg-type]


def test_data_home_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_leaf(tmp_path / "env" / "femnist")
    monkeypatch.setenv("FAIRTUNE_DATA", str(tmp_path / "env"))
    _check(fetch_femnist(download_if_missing=False))


# --------------------------------------------------------------------------------------------
# Wrong or corrupted files
# --------------------------------------------------------------------------------------------


def test_no_files_without_download_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="No FEMNIST files in .*femnist"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)


def test_truncated_hdf5_names_the_file(tmp_path: Path) -> None:
    _write_tff(tmp_path / "femnist")
    path = tmp_path / "femnist" / "fed_emnist_test.h5"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ValueError, match="fed_emnist_test.h5: not a readable HDF5 file"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)


def test_hdf5_labels_outside_range_name_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "femnist"
    folder.mkdir()
    _write_h5(folder / "fed_emnist_train.h5", {"w0": [(1, 0), (2, 0)]}, labels=[1, 62])
    _write_h5(folder / "fed_emnist_test.h5", {})
    with pytest.raises(ValueError, match=r"fed_emnist_train.h5: writer 'w0' has labels outside "
                                         r"0..61 \(min 1, max 62\)"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)


def test_leaf_shard_without_user_data_names_the_file(tmp_path: Path) -> None:
    _write_leaf(tmp_path / "femnist")
    bad = tmp_path / "femnist" / "test" / "all_data_0_test.json"
    bad.write_text(json.dumps({"users": ["w3"], "num_samples": [2]}))
    with pytest.raises(ValueError, match=r"all_data_0_test.json: a LEAF shard must have a "
                                         r"'user_data' key"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)


def test_leaf_labels_outside_range_and_truncated_json_name_the_file(tmp_path: Path) -> None:
    _write_leaf(tmp_path / "femnist")
    path = tmp_path / "femnist" / "train" / "all_data_0_train.json"
    shard = json.loads(path.read_text())
    shard["user_data"]["w0"]["y"][0] = -1
    path.write_text(json.dumps(shard))
    with pytest.raises(ValueError, match="all_data_0_train.json: writer 'w0' has labels outside"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)
    path.write_text(json.dumps(shard)[:200])
    with pytest.raises(ValueError, match="all_data_0_train.json: not valid JSON"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)


def test_parquet_without_columns_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "femnist").mkdir()
    pq.write_table(pa.table({"image": [b"x"], "label": [1]}), tmp_path / "femnist" / "a.parquet")
    with pytest.raises(ValueError, match=r"a.parquet: .* misses \['character', 'writer_id'\]"):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)


def test_missing_optional_dependency_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_tff(tmp_path / "femnist")
    monkeypatch.setitem(sys.modules, "h5py", None)  # import h5py now raises ImportError
    with pytest.raises(ImportError, match=r'needs h5py.*pip install "fairtune\[femnist\]"'):
        fetch_femnist(data_home=tmp_path, download_if_missing=False)


# --------------------------------------------------------------------------------------------
# Download from a local HTTP server
# --------------------------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.payload``; honours Range if ``server.honour_range``; the first
    ``server.interrupt`` responses announce the full length and stop halfway."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        server: Any = self.server
        server.requests.append((self.path, self.headers.get("Range")))
        payload: bytes = server.payload
        start = 0
        range_header = self.headers.get("Range")
        if server.status is not None or (range_header and server.honour_range == 416):
            self.send_error(server.status or 416)
            return
        if range_header and server.honour_range:
            start = int(range_header.split("=")[1].rstrip("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
        else:
            self.send_response(200)
        body = payload[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.interrupt > 0:
            server.interrupt -= 1
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            return  # HTTP/1.0: the connection closes with half the bytes sent
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _tff_archive(tmp_path: Path, prefix: str) -> bytes:
    src = tmp_path / "archive_src"
    _write_tff(src, prefix)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as tar:
        for split in ("train", "test"):
            tar.add(src / f"{prefix}_{split}.h5", arcname=f"{prefix}_{split}.h5")
    return buf.getvalue()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    httpd: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.payload = _tff_archive(tmp_path, "fed_emnist")
    httpd.requests = []
    httpd.honour_range = True  # True, False (answer 200) or 416
    httpd.interrupt = 0
    httpd.status = None  # an HTTP error code to answer every request with
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    monkeypatch.setattr(_femnist, "_TFF_URL", f"http://127.0.0.1:{httpd.server_port}/")
    monkeypatch.setattr(_femnist, "_RETRY_DELAY", 0.0)
    sha = hashlib.sha256(httpd.payload).hexdigest()
    monkeypatch.setitem(_femnist._TFF_ARCHIVES, False, ("fed_emnist", sha))
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_download_verifies_extracts_and_reads(
    tmp_path: Path, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    data = fetch_femnist(data_home=home)
    _check(data)
    assert server.requests == [("/fed_emnist.tar.bz2", None)]
    # The two .h5 files are in place; the archive and every temporary file are gone.
    assert _listing(home / "femnist") == ["fed_emnist_test.h5", "fed_emnist_train.h5"]
    assert "100.0%" in capsys.readouterr().err  # the progress bar reached the end
    fetch_femnist(data_home=home)
    assert len(server.requests) == 1  # read from the cache the second time


def test_download_checksum_mismatch_is_refused_and_leaves_nothing(
    tmp_path: Path, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(_femnist._TFF_ARCHIVES, False, ("fed_emnist", "0" * 64))
    with pytest.raises(ChecksumError, match="fed_emnist.tar.bz2: expected 0000") as info:
        fetch_femnist(data_home=tmp_path / "home", progress=False)
    assert hashlib.sha256(server.payload).hexdigest() in str(info.value)
    assert _listing(tmp_path / "home" / "femnist") == []
    with pytest.raises(FileNotFoundError):  # nothing that a later call would read
        fetch_femnist(data_home=tmp_path / "home", download_if_missing=False)


def test_interrupted_transfer_is_resumed(tmp_path: Path, server: Any) -> None:
    server.interrupt = 1
    data = fetch_femnist(data_home=tmp_path / "home", progress=False)
    _check(data)
    half = len(server.payload) // 2
    assert server.requests == [("/fed_emnist.tar.bz2", None),
                               ("/fed_emnist.tar.bz2", f"bytes={half}-")]
    assert _listing(tmp_path / "home" / "femnist") == ["fed_emnist_test.h5",
                                                        "fed_emnist_train.h5"]


def test_interrupted_transfer_restarts_when_range_is_ignored(tmp_path: Path, server: Any) -> None:
    server.interrupt = 1
    server.honour_range = False  # the server answers 200 with every byte: start over
    _check(fetch_femnist(data_home=tmp_path / "home", progress=False))
    assert len(server.requests) == 2


def test_unsatisfiable_range_restarts_the_transfer(tmp_path: Path, server: Any) -> None:
    server.interrupt = 1
    server.honour_range = 416
    _check(fetch_femnist(data_home=tmp_path / "home", progress=False))
    assert [r for _, r in server.requests][1] is not None  # the range that was refused
    assert [r for _, r in server.requests][2] is None  # then every byte again
    assert len(server.requests) == 3


def test_http_not_found_is_not_retried(tmp_path: Path, server: Any) -> None:
    server.status = 404
    with pytest.raises(OSError, match=r"fed_emnist.tar.bz2 after 1 attempt\(s\): HTTP Error 404"):
        fetch_femnist(data_home=tmp_path / "home", progress=False)
    assert len(server.requests) == 1
    assert _listing(tmp_path / "home" / "femnist") == []


def test_download_gives_up_after_retries_and_leaves_nothing(tmp_path: Path, server: Any) -> None:
    server.interrupt = 10
    with pytest.raises(OSError, match="after 4 attempt"):
        fetch_femnist(data_home=tmp_path / "home", progress=False)
    assert len(server.requests) == 4
    assert _listing(tmp_path / "home" / "femnist") == []


def test_corrupted_cached_archive_is_downloaded_again(tmp_path: Path, server: Any) -> None:
    folder = tmp_path / "home" / "femnist"
    folder.mkdir(parents=True)
    (folder / "fed_emnist.tar.bz2").write_bytes(server.payload[:100])  # a stale half file
    _check(fetch_femnist(data_home=tmp_path / "home", progress=False))
    assert len(server.requests) == 1


# --------------------------------------------------------------------------------------------
# Partition into tenants, and the embedded stand-in
# --------------------------------------------------------------------------------------------


def test_partition_is_deterministic_disjoint_and_splits_each_writer() -> None:
    data = federated_digits(n_writers=30, seed=0)
    parts = data.partition(n_tenants=3, writers_per_tenant=4, validation_fraction=0.25, seed=1)
    again = data.partition(n_tenants=3, writers_per_tenant=4, validation_fraction=0.25, seed=1)
    other = data.partition(n_tenants=3, writers_per_tenant=4, validation_fraction=0.25, seed=2)
    assert list(parts) == ["t0", "t1", "t2"]
    for name in parts:
        assert parts[name].writers == again[name].writers
        np.testing.assert_array_equal(parts[name].X_valid, again[name].X_valid)
        np.testing.assert_array_equal(parts[name].y_train, again[name].y_train)
    assert [p.writers for p in parts.values()] != [p.writers for p in other.values()]
    writers = [w for p in parts.values() for w in p.writers]
    assert len(writers) == len(set(writers)) == 12
    for part in parts.values():
        # Train and validation are exactly the writers' examples, without overlap.
        images = np.concatenate([data.examples(w)[0] for w in part.writers])
        both = np.concatenate([part.X_train, part.X_valid])
        assert len(both) == len(images)
        key = lambda X: sorted(x.tobytes() for x in X)  # noqa: E731
        assert key(both) == key(images)
        sizes = [len(data.examples(w)[1]) for w in part.writers]
        assert len(part.y_valid) == sum(max(1, round(0.25 * s)) for s in sizes)
        assert part.X_train.shape[1:] == (8, 8) and part.y_train.dtype == np.int64


def test_partition_rejects_bad_arguments() -> None:
    data = federated_digits(n_writers=10)
    with pytest.raises(ValueError, match=r"at most the 10 writers .* n_tenants=3, "
                                         r"writers_per_tenant=4 \(12 writers\)"):
        data.partition(n_tenants=3, writers_per_tenant=4)
    with pytest.raises(ValueError, match="`n_tenants` must be a positive integer, but got "
                                         "n_tenants=0"):
        data.partition(n_tenants=0)
    with pytest.raises(ValueError, match=r"`validation_fraction` must be a float in \(0, 1\)"):
        data.partition(n_tenants=1, writers_per_tenant=1, validation_fraction=1.0)


def test_federated_digits_covers_sklearn_digits_once() -> None:
    from sklearn.datasets import load_digits

    data = federated_digits(n_writers=100, seed=0)
    assert len(data) == 100 and data.n_examples == 1797
    assert "NOT split by writer" in data.DESCR
    X = np.concatenate([data.examples(w)[0] for w in data.writers])
    digits = load_digits()
    assert sorted(x.tobytes() for x in X) == sorted(
        (img / 16.0).astype(np.float32).tobytes() for img in digits.images)
    assert X.min() == 0.0 and X.max() == 1.0
    with pytest.raises(ValueError, match="`n_writers` must be in 1..1797, but got n_writers=0"):
        federated_digits(n_writers=0)
