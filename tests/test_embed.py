"""The embed stage and its backends, with real models that registry packages ship (tests/conftest.py)."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from dataclean.embed.models import EmbedderError, folder_digest, load_embedder
from dataclean.embed.vectors import decode, encode
from dataclean.stages.embed import Embed


TEXTS = ["The city council voted on Tuesday to build a new public library near the central train station.",
         "On Tuesday the city council approved plans for a new public library close to the main railway station.",
         "Tomatoes grow best in full sun and need regular watering.",
         "市政府周二宣布，将在火车站附近新建一座公共图书馆。"]


def test_the_column_is_unit_float16_with_nulls_for_missing_rows():
    v = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]], np.float32)
    col = encode(v, np.array([True, True, False]))
    assert col.type == pa.binary(4) and col.null_count == 1
    out, ok = decode(col)
    assert out.tolist() == [[0.60009765625, 0.7998046875], [0.0, 0.0], [0.0, 0.0]]  # 0.6, 0.8 in float16
    assert ok.tolist() == [True, True, False]
    with pytest.raises(ValueError, match="does not match"):
        decode(col, dim=3)


def test_static_backend_is_model2vec_of_the_folder(static_model_dir):
    from model2vec import StaticModel

    emb = load_embedder(static_model_dir)
    assert (emb.backend, emb.dim, emb.max_tokens, emb.device) == ("static", 256, 512, "cpu")
    ours = emb.embed(TEXTS)
    ref = StaticModel.from_pretrained(static_model_dir, force_download=False).encode(TEXTS, use_multiprocessing=False)
    ref = ref.astype(np.float32)  # (model2vec returns the matrix's float16)
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    assert np.abs(ours - ref).max() < 2e-4
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


def test_sentence_transformers_backend_is_the_library_and_onnx_matches_it(minilm_dir, onnx_minilm_dir):
    from sentence_transformers import SentenceTransformer

    st = load_embedder(minilm_dir)
    assert (st.backend, st.dim, st.max_tokens) == ("sentence-transformers", 384, 256)
    ref = SentenceTransformer(minilm_dir, device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert np.abs(st.embed(TEXTS) - ref).max() < 1e-5
    onnx = load_embedder(onnx_minilm_dir)
    assert (onnx.backend, onnx.dim, onnx.max_tokens) == ("onnx", 384, 256)
    cos = (onnx.embed(TEXTS) * ref).sum(axis=1)
    assert cos.min() > 0.99999
    # the two paraphrases are near, the unrelated text is not
    v = onnx.embed(TEXTS)
    assert round(float(v[0] @ v[1]), 2) == 0.85 and float(v[0] @ v[2]) < 0.2


def test_long_texts_are_cut_or_windowed(minilm_dir):
    long = " ".join(["The library will open in two years."] * 200) + " " + " ".join(
        ["Tomatoes need sun and water every day."] * 200)
    cut = load_embedder(minilm_dir, max_tokens=64)
    win = load_embedder(minilm_dir, max_tokens=64, long_text="windows", max_windows=64)
    a, b = cut.embed([long, TEXTS[0]]), win.embed([long, TEXTS[0]])
    assert np.abs(a[1] - b[1]).max() < 1e-6  # a short text is one window: the same vector
    tomato = cut.embed(["Tomatoes need sun and water every day."])[0]
    assert float(b[0] @ tomato) > float(a[0] @ tomato) + 0.2  # only the windows see the text's second half


def test_threads_are_bounded_by_the_cores(static_model_dir):
    cores = len(os.sched_getaffinity(0))
    assert load_embedder(static_model_dir, threads=64).threads == cores
    assert load_embedder(static_model_dir).threads == 1


def test_a_name_that_is_not_a_folder_is_refused_with_how_to_fetch_it(tmp_path):
    with pytest.raises(EmbedderError) as e:
        load_embedder("BAAI/bge-m3")
    msg = str(e.value)
    assert "\n" not in msg and "never downloads" in msg
    assert "huggingface-cli download BAAI/bge-m3 --local-dir models/bge-m3" in msg
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbedderError, match="not a model folder dataclean can read"):
        load_embedder(str(tmp_path / "empty"))
    with pytest.raises(EmbedderError, match="long_text must be one of truncate, windows"):
        load_embedder(str(tmp_path / "empty"), long_text="chunks")


def test_the_folder_digest_changes_with_any_model_file(static_model_dir, tmp_path):
    import shutil

    copy = tmp_path / "m"
    shutil.copytree(static_model_dir, copy)
    d = folder_digest(str(copy))
    assert d == folder_digest(static_model_dir)
    (copy / "README.md").write_text("notes")  # not a model file
    assert folder_digest(str(copy)) == d
    with open(copy / "config.json", "a") as fh:
        fh.write(" ")
    assert folder_digest(str(copy)) != d


def test_the_stage_adds_the_column_and_skips_empty_texts(static_model_dir):
    stage = Embed(model=static_model_dir)
    batch = pa.record_batch({"id": ["a", "b", "c"], "text": [TEXTS[0], "", None]})
    out = stage(batch).batch
    col = out.column("embedding")
    assert col.type == pa.binary(512) and col.null_count == 2
    v, ok = decode(col)
    ref = stage.embedder.embed([TEXTS[0]])[0].astype(np.float16).astype(np.float32)
    assert ok.tolist() == [True, False, False] and np.array_equal(v[0], ref)


def test_a_run_with_an_embed_stage_keeps_the_column_out_of_the_shards(static_model_dir, tmp_path):
    docs = tmp_path / "in" / "docs.jsonl"
    docs.parent.mkdir()
    docs.write_text("".join(f'{{"id": "d{i}", "text": "{t}"}}\n' for i, t in enumerate(TEXTS)), encoding="utf-8")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"pipeline:\n  - stage: normalize\n  - stage: embed\n    model: {static_model_dir}\n")
    r = run_cli("run", docs.parent, "-o", tmp_path / "out", "--config", cfg, "--quiet")
    assert r.returncode == 0, r.stderr
    shards = sorted((tmp_path / "out").glob("data/*.parquet")) or sorted((tmp_path / "out").rglob("part-*.parquet"))
    names = set(pq.read_schema(shards[0]).names)
    assert "embedding" not in names and {"id", "text"} <= names


def test_run_refuses_a_model_name_in_one_line(tmp_path):
    docs = tmp_path / "in" / "docs.jsonl"
    docs.parent.mkdir()
    docs.write_text('{"id": "a", "text": "hello there"}\n')
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pipeline:\n  - stage: embed\n    model: intfloat/multilingual-e5-small\n")
    r = run_cli("run", docs.parent, "-o", tmp_path / "out", "--config", cfg)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "is not a local folder" in lines[0] and "huggingface-cli download" in lines[0]
