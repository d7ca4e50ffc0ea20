"""Near-duplicate detection primitives: shingling, MinHash signatures (datasketch-compatible), LSH bands.

See :mod:`dataclean.dedup.minhash` for the definitions; the pipeline stage builds on these functions.
"""
from dataclean.dedup.minhash import (
    DEFAULT_SCHEME,
    MAX_HASH,
    SCHEMES,
    band_hashes,
    compute_optimal_bands,
    estimate_jaccard,
    optimal_bands,
    permutations,
    shingle_hash,
    shingle_hash_single,
    shingle_hashes,
    shingle_text,
    shingles_single,
    signatures,
    to_lean_minhash,
)

__all__ = [
    "DEFAULT_SCHEME", "MAX_HASH", "SCHEMES", "band_hashes", "estimate_jaccard", "compute_optimal_bands", "optimal_bands",
    "permutations", "shingle_hash", "shingle_hash_single", "shingle_hashes", "shingle_text",
    "shingles_single", "signatures", "to_lean_minhash",
]
