"""``dataclean compare``: the gate before a candidate corpus (synthetic data, a new crawl) enters a mixture.

Both sides are sampled (by id hash), measured the same way (lengths, compression, language, every rule
signal of the pipeline's pass-1 stages, quality score, lexical diversity, top n-grams, near-duplicates),
compared (JS divergence and KS statistic per feature) and checked against the gates of
``rules/compare/default.yaml`` (or a file merged onto it). ``compare.json`` and ``compare.html`` hold the
results. See ``docs/compare.md``.

    from dataclean.compare import compare
    result = compare("reference/", "candidate.jsonl.zst", "compare-out")
    result["passed"], result["failed"]
"""
from dataclean.compare.core import DEFAULT_SAMPLE, compare
from dataclean.compare.load import CompareError

__all__ = ["CompareError", "DEFAULT_SAMPLE", "compare"]
