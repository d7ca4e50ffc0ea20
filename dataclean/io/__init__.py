"""Reading input shards into canonical record batches and writing Parquet shards atomically."""
from dataclean.io.readers import ColumnMapping, InputFileError, ReadChunk, detect_format, discover_inputs, read_shard
from dataclean.io.writers import ShardWriter, atomic_write_table, write_json_atomic

__all__ = [
    "ColumnMapping",
    "InputFileError",
    "ReadChunk",
    "discover_inputs",
    "detect_format",
    "read_shard",
    "ShardWriter",
    "atomic_write_table",
    "write_json_atomic",
]
