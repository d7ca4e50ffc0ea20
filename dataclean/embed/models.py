"""Text embedders from local model folders: one L2-normalised float32 vector per text.

Three backends, chosen from the folder's files when ``backend`` is ``auto``:

* ``static`` — a model2vec folder (``model.safetensors`` holding the token-embedding matrix, ``tokenizer.json``,
  ``config.json``): the mean of the text's token embeddings, by ``model2vec``.
* ``onnx`` — a transformer exported to ONNX (``model.onnx`` or ``onnx/model.onnx``) with its ``tokenizer.json``;
  pooling (mean or CLS) from ``1_Pooling/config.json`` when the folder has one, else mean. Needs
  ``onnxruntime`` and ``tokenizers``; a GPU through onnxruntime's CUDA provider when installed.
* ``sentence-transformers`` — a sentence-transformers folder (``modules.json``); needs ``torch`` and
  ``sentence-transformers`` (the ``embed-torch`` extra); a GPU when torch sees one.

``auto`` takes ``onnx`` when the folder has an ONNX file, ``static`` for a model2vec folder, else
``sentence-transformers`` for a folder with ``modules.json``.

Nothing is ever downloaded: a model that is not a local folder is refused with one line saying how to fetch
it. Long texts (more tokens than ``max_tokens``) are cut (``long_text: truncate``) or embedded in consecutive
windows of ``max_tokens`` tokens whose embeddings are averaged, weighted by their token counts
(``long_text: windows``); ``max_windows`` bounds the windows per text.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np

BACKENDS = ("auto", "static", "onnx", "sentence-transformers")
LONG_TEXT = ("truncate", "windows")
DEVICES = ("auto", "cpu", "cuda")
#: Files that do not change what a model computes; left out of the folder digest.
_NOT_MODEL = {"README.md", ".gitattributes", ".gitignore", "LICENSE", "LICENSE.txt"}


class EmbedderError(ValueError):
    """A model that cannot be used, in one line that says what to do."""


def _model_files(path: str) -> list[tuple[str, str]]:
    if os.path.isfile(path):
        return [("", path)]
    files = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name in _NOT_MODEL or name.startswith("."):
                continue
            full = os.path.join(root, name)
            files.append((os.path.relpath(full, path).replace(os.sep, "/"), full))
    return sorted(files)


def _signature(path: str) -> tuple:
    """What identifies a folder's state cheaply: each model file's path, size and modification time."""
    out = []
    for rel, full in _model_files(path):
        st = os.stat(full)
        out.append((rel, st.st_size, st.st_mtime_ns))
    return (os.path.abspath(path), tuple(out))


_DIGESTS: dict[tuple, str] = {}
_LOADED: dict[tuple, "Embedder"] = {}


def folder_digest(path: str) -> str:
    """sha256 over a model folder's files (relative path, size, bytes), in path order; a file the same. Hashed
    once per process while the files' sizes and modification times stay (a 2 GB model takes seconds)."""
    sig = _signature(path)
    if sig not in _DIGESTS:
        _DIGESTS[sig] = _hash_files(_model_files(path))
    return _DIGESTS[sig]


def _hash_files(files: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for rel, full in files:
        h.update(f"{rel}\0{os.path.getsize(full)}\0".encode())
        with open(full, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _not_local(model: str) -> EmbedderError:
    if os.path.isfile(model):
        return EmbedderError(f"embedding model {model!r} is a file, not a model folder: give the folder that holds "
                             "it with its tokenizer.json (and config.json)")
    return EmbedderError(
        f"embedding model {model!r} is not a local folder, and dataclean never downloads: fetch it first, e.g. "
        f"`huggingface-cli download {model} --local-dir models/{os.path.basename(model.rstrip('/')) or 'model'}`, "
        "and give that folder")


def detect_backend(path: str) -> str:
    """The backend ``auto`` picks for the folder ``path`` (see the module docstring)."""
    has = lambda *p: os.path.exists(os.path.join(path, *p))  # noqa: E731
    if has("model.onnx") or has("onnx", "model.onnx"):
        return "onnx"
    if has("model.safetensors") and has("tokenizer.json") and _model2vec_config(path) is not None:
        return "static"
    if has("modules.json") or has("config_sentence_transformers.json"):
        return "sentence-transformers"
    raise EmbedderError(
        f"{path} is not a model folder dataclean can read: it needs model.onnx (or onnx/model.onnx) with "
        "tokenizer.json, a model2vec folder (model.safetensors, tokenizer.json, config.json), or a "
        "sentence-transformers folder (modules.json)")


def _model2vec_config(path: str) -> dict | None:
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as fh:
            cfg = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict):
        return None
    # model2vec writes model_type "model2vec"; a folder with only the embedding matrix and a tokenizer is
    # static too when its config says so
    if cfg.get("model_type") == "model2vec" or cfg.get("architectures") == ["StaticModel"]:
        return cfg
    return None


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@dataclass
class Embedder:
    """A loaded model: :meth:`embed` maps texts to L2-normalised float32 rows of width :attr:`dim`."""

    name: str
    backend: str
    path: str
    dim: int
    max_tokens: int
    digest: str
    device: str
    threads: int
    long_text: str = "truncate"
    max_windows: int = 8
    batch_size: int = 64
    _impl: object = field(default=None, repr=False)

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, each row of norm 1 (a text with no token: a zero row)."""
        texts = ["" if t is None else t for t in texts]
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        out = self._impl.embed(texts, self)
        out = np.asarray(out, np.float32).reshape(len(texts), self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)

    def describe(self) -> dict:
        return {"name": self.name, "backend": self.backend, "path": self.path, "dim": self.dim,
                "max_tokens": self.max_tokens, "long_text": self.long_text, "digest": self.digest,
                "device": self.device}


def load_embedder(model: str, backend: str = "auto", device: str = "auto", threads: int | None = None,
                  max_tokens: int | None = None, long_text: str = "truncate", batch_size: int = 64,
                  max_windows: int = 8) -> Embedder:
    """The embedder of the local folder ``model``; :class:`EmbedderError` (one line) when it cannot be used."""
    if not isinstance(model, str) or not model:
        raise EmbedderError(f"embedding model must be a local folder, not {model!r}")
    if backend not in BACKENDS:
        raise EmbedderError(f"embedding backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if device not in DEVICES:
        raise EmbedderError(f"embedding device must be one of {', '.join(DEVICES)}, not {device!r}")
    if long_text not in LONG_TEXT:
        raise EmbedderError(f"long_text must be one of {', '.join(LONG_TEXT)}, not {long_text!r}")
    for key, v, lo in (("threads", threads, 1), ("max_tokens", max_tokens, 1), ("batch_size", batch_size, 1),
                       ("max_windows", max_windows, 1)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
            raise EmbedderError(f"embedding {key} must be a whole number >= {lo}, not {v!r}")
    path = os.path.expanduser(model)
    if not os.path.isdir(path):
        raise _not_local(model)
    path = os.path.abspath(path)
    chosen = detect_backend(path) if backend == "auto" else backend
    threads = max(1, min(threads or 1, _cores()))
    key = (_signature(path), chosen, device, threads, max_tokens, long_text, batch_size, max_windows)
    if key in _LOADED:  # (the config check, the driver's pipeline and each task of a worker load the same)
        return _LOADED[key]
    impl_cls = {"static": _Static, "onnx": _Onnx, "sentence-transformers": _SentenceTransformers}[chosen]
    impl = impl_cls(path, device, threads)
    limit = impl.max_tokens if max_tokens is None else min(max_tokens, impl.max_tokens)
    emb = Embedder(name=os.path.basename(path.rstrip(os.sep)), backend=chosen, path=path, dim=impl.dim,
                   max_tokens=limit, digest=folder_digest(path), device=impl.device, threads=threads,
                   long_text=long_text, max_windows=max_windows, batch_size=batch_size, _impl=impl)
    _LOADED.clear()  # one model held per process
    _LOADED[key] = emb
    return emb


# -- tokenization shared by the static and ONNX backends --------------------------------------------------
def _tokenizer(path: str, threads: int):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true" if threads > 1 else "false")
    os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        raise EmbedderError("embedding needs the 'tokenizers' package: pip install 'dataclean[embed]'") from e
    file = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(file):
        raise EmbedderError(f"{path} has no tokenizer.json: save the model's fast tokenizer in the folder")
    try:
        tok = Tokenizer.from_file(file)
    except Exception as e:  # the library raises its own Exception subclass
        raise EmbedderError(f"cannot load {file}: {e}") from e
    tok.no_truncation()
    tok.no_padding()
    return tok


def _pieces(encodings, limit: int, emb: Embedder) -> tuple[list[list[int]], np.ndarray]:
    """Token id lists of at most ``limit`` ids and, per piece, the text it belongs to: one piece per text when
    truncating, up to ``max_windows`` consecutive windows when windowing."""
    ids: list[list[int]] = []
    owner: list[int] = []
    windows = emb.long_text == "windows"
    for i, enc in enumerate(encodings):
        seq = enc.ids
        if not windows or len(seq) <= limit:
            ids.append(seq[:limit])
            owner.append(i)
            continue
        for w in range(min(emb.max_windows, -(-len(seq) // limit))):
            ids.append(seq[w * limit:(w + 1) * limit])
            owner.append(i)
    return ids, np.asarray(owner, np.int64)


def _merge(vectors: np.ndarray, counts: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Per text, the token-count weighted mean of its pieces' (normalised) vectors."""
    if len(owner) == n:
        return vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    out = np.zeros((n, vectors.shape[1]), np.float64)
    np.add.at(out, owner, unit * counts[:, None])
    return out.astype(np.float32)


class _Static:
    """A model2vec folder through model2vec's own ``StaticModel`` (the mean of the text's token embeddings).
    Measured on 4,000 bench documents, one core: model2vec 3,280-3,660 docs/s, a numpy mean over
    ``tokenizers`` ids written here 1,750-2,130 (cosine between the two >= 0.9999): the library it is.
    Windows of a static model are its token mean over ``max_tokens * max_windows`` tokens: the weighted mean
    of the windows' means is that mean."""

    def __init__(self, path: str, device: str, threads: int):
        if _model2vec_config(path) is None:
            raise EmbedderError(f"{path} is not a model2vec folder (config.json with model_type: model2vec)")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "true" if threads > 1 else "false")
        os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from model2vec import StaticModel
        except ImportError as e:
            raise EmbedderError("static models need model2vec: pip install 'dataclean[embed]'") from e
        try:
            self.model = StaticModel.from_pretrained(path, force_download=False)
        except Exception as e:  # noqa: BLE001 - one line for the user, whatever the library raised
            raise EmbedderError(f"cannot load the model2vec folder {path}: {e}") from e
        self.dim = int(self.model.dim)
        self.max_tokens = int(getattr(self.model, "max_length", None) or 512)
        self.device = "cpu"

    def embed(self, texts: list[str], emb: Embedder) -> np.ndarray:
        limit = emb.max_tokens * (emb.max_windows if emb.long_text == "windows" else 1)
        return self.model.encode(texts, max_length=limit, batch_size=max(emb.batch_size, 1024),
                                 use_multiprocessing=False, show_progress_bar=False)


class _Onnx:
    def __init__(self, path: str, device: str, threads: int):
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise EmbedderError("ONNX models need 'onnxruntime': pip install 'dataclean[embed]'") from e
        file = os.path.join(path, "model.onnx")
        if not os.path.isfile(file):
            file = os.path.join(path, "onnx", "model.onnx")
        if not os.path.isfile(file):
            raise EmbedderError(f"{path} has no model.onnx (nor onnx/model.onnx)")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        if device in ("auto", "cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        elif device == "cuda":
            raise EmbedderError("device: cuda, but onnxruntime has no CUDA provider here: install "
                                "onnxruntime-gpu, or use device: cpu")
        self.session = ort.InferenceSession(file, sess_options=opts, providers=providers)
        self.device = "cuda" if self.session.get_providers()[0] == "CUDAExecutionProvider" else "cpu"
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tok = _tokenizer(path, threads)
        pooling = _read_json(os.path.join(path, "1_Pooling", "config.json")) or {}
        self.cls = bool(pooling.get("pooling_mode_cls_token"))
        cfg = _read_json(os.path.join(path, "config.json")) or {}
        st = _read_json(os.path.join(path, "sentence_bert_config.json")) or {}
        self.max_tokens = int(st.get("max_seq_length") or cfg.get("max_position_embeddings") or 512)
        pad = (_read_json(os.path.join(path, "tokenizer_config.json")) or {}).get("pad_token")
        self.pad_id = self.tok.token_to_id(pad) if isinstance(pad, str) else None
        self.pad_id = 0 if self.pad_id is None else self.pad_id
        out = self.session.get_outputs()[0]
        self.dim = int(out.shape[-1]) if isinstance(out.shape[-1], int) else int(cfg.get("hidden_size", 0))
        if not self.dim:
            raise EmbedderError(f"cannot tell the embedding width of {file}: give config.json its hidden_size")

    def embed(self, texts: list[str], emb: Embedder) -> np.ndarray:
        encs = self.tok.encode_batch(texts, add_special_tokens=False)
        body = emb.max_tokens - 2  # room for [CLS] and [SEP]
        ids, owner = _pieces(encs, max(body, 1), emb)
        cls_id, sep_id = self._specials()
        ids = [[cls_id, *s, sep_id] for s in ids]
        lens = np.fromiter((len(s) for s in ids), np.int64, len(ids))
        order = np.argsort(-lens, kind="stable")  # batches of like lengths pad little
        vec = np.zeros((len(ids), self.dim), np.float32)
        for lo in range(0, len(ids), emb.batch_size):
            rows = order[lo:lo + emb.batch_size]
            width = int(lens[rows].max())
            x = np.full((len(rows), width), self.pad_id, np.int64)
            mask = np.zeros((len(rows), width), np.int64)
            for r, j in enumerate(rows):
                x[r, :lens[j]] = ids[j]
                mask[r, :lens[j]] = 1
            feed = {"input_ids": x, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(x)
            feed = {k: v for k, v in feed.items() if k in self.inputs}
            hidden = self.session.run(None, feed)[0]
            if hidden.ndim == 2:
                vec[rows] = hidden
            elif self.cls:
                vec[rows] = hidden[:, 0]
            else:
                m = mask[..., None].astype(np.float32)
                vec[rows] = (hidden * m).sum(1) / np.maximum(m.sum(1), 1.0)
        return _merge(vec, (lens - 2).astype(np.float32), owner, len(texts))

    def _specials(self) -> tuple[int, int]:
        enc = self.tok.encode("", add_special_tokens=True).ids
        if len(enc) >= 2:
            return enc[0], enc[-1]
        for a, b in (("[CLS]", "[SEP]"), ("<s>", "</s>")):
            if self.tok.token_to_id(a) is not None and self.tok.token_to_id(b) is not None:
                return self.tok.token_to_id(a), self.tok.token_to_id(b)
        raise EmbedderError("cannot find the tokenizer's start and end tokens ([CLS]/[SEP] or <s>/</s>)")


class _SentenceTransformers:
    def __init__(self, path: str, device: str, threads: int):
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise EmbedderError("sentence-transformers folders need torch and sentence-transformers: pip install "
                                "'dataclean[embed-torch]' (or export the model to ONNX and use backend: onnx)") from e
        torch.set_num_threads(threads)
        if device == "cuda" and not torch.cuda.is_available():
            raise EmbedderError("device: cuda, but torch sees no GPU here: use device: cpu or auto")
        self.device = "cuda" if device in ("auto", "cuda") and torch.cuda.is_available() else "cpu"
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # (a bar per worker per load on stderr)
        except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
            pass
        try:
            self.model = SentenceTransformer(path, device=self.device, local_files_only=True)
        except Exception as e:  # noqa: BLE001 - the library raises many kinds; one line for the user
            raise EmbedderError(f"cannot load the sentence-transformers folder {path}: {e}") from e
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim())
        self.max_tokens = int(self.model.max_seq_length)
        self.tok = self.model.tokenizer

    def embed(self, texts: list[str], emb: Embedder) -> np.ndarray:
        self.model.max_seq_length = emb.max_tokens
        if emb.long_text == "truncate":
            return self.model.encode(texts, batch_size=emb.batch_size, convert_to_numpy=True,
                                     normalize_embeddings=True, show_progress_bar=False)
        body = max(emb.max_tokens - 2, 1)
        pieces: list[str] = []
        owner: list[int] = []
        counts: list[int] = []
        for i, t in enumerate(texts):
            enc = self.tok(t, add_special_tokens=False, return_offsets_mapping=True)
            offs = enc["offset_mapping"]
            n = len(offs)
            if n <= body:
                pieces.append(t)
                owner.append(i)
                counts.append(max(n, 1))
                continue
            for w in range(min(emb.max_windows, -(-n // body))):
                a, b = offs[w * body][0], offs[min((w + 1) * body, n) - 1][1]
                pieces.append(t[a:b])
                owner.append(i)
                counts.append(min(body, n - w * body))
        vec = self.model.encode(pieces, batch_size=emb.batch_size, convert_to_numpy=True,
                                normalize_embeddings=True, show_progress_bar=False)
        return _merge(vec, np.asarray(counts, np.float32), np.asarray(owner, np.int64), len(texts))


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
