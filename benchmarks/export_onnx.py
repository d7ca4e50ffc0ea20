"""Export a sentence-transformers (BERT-like) folder's transformer to an ONNX model folder that the ``embed``
stage reads with ``backend: onnx``: ``model.onnx`` (inputs ``input_ids``, ``attention_mask``,
``token_type_ids``; output ``last_hidden_state``), the tokenizer files and the pooling config.

    python benchmarks/export_onnx.py MODEL_FOLDER OUT_FOLDER

Needs torch, transformers and onnx (``pip install 'dataclean[embed-torch]' onnx``); runs offline.
"""
from __future__ import annotations

import os
import shutil
import sys

COPIED = ("tokenizer.json", "tokenizer_config.json", "config.json", "sentence_bert_config.json",
          "special_tokens_map.json", "vocab.txt")


def export(src: str, dst: str, opset: int = 17) -> str:
    import torch
    from transformers import AutoModel

    os.makedirs(dst, exist_ok=True)
    base = AutoModel.from_pretrained(src, local_files_only=True).eval()

    class Hidden(torch.nn.Module):  # keyword arguments: the models' forward() signatures differ by version
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]
    with torch.no_grad():
        torch.onnx.export(Hidden(base), (ids, torch.ones_like(ids), torch.zeros_like(ids)),
                          os.path.join(dst, "model.onnx"), input_names=names[:3], output_names=names[3:],
                          dynamic_axes={k: {0: "batch", 1: "tokens"} for k in names}, opset_version=opset,
                          dynamo=False)
    for name in COPIED:
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), dst)
    pooling = os.path.join(src, "1_Pooling", "config.json")
    if os.path.exists(pooling):
        os.makedirs(os.path.join(dst, "1_Pooling"), exist_ok=True)
        shutil.copy(pooling, os.path.join(dst, "1_Pooling"))
    return dst


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-3])
    print(export(sys.argv[1], sys.argv[2]))
