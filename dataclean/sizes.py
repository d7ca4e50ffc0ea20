"""Sizes in bytes as a config gives them (``4GB``, ``1.5GiB``) and as DuckDB takes them."""
from __future__ import annotations

import re

_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*")


def parse_size(value, key: str) -> int:
    """Bytes of ``value``: an integer (bytes) or a string with a unit, as DuckDB reads them (``2GB`` = 2·10⁹,
    ``2GiB`` = 2³⁰; ``2G`` = 2GiB, like ``ulimit``). Anything else, a string without a unit too, is a ValueError
    naming ``key``."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _SIZE.fullmatch(value) if isinstance(value, str) else None
    unit = m.group(2).lower() if m else ""
    if m is not None and not unit:  # (--memory-limit 2: 2 bytes, or 2 GB? said, not guessed)
        raise ValueError(f"{key}: {value!r} has no unit: write {m.group(1)}GB, {m.group(1)}MB or {m.group(1)}GiB")
    if m is None or unit not in _UNITS or float(m.group(1)) <= 0:
        raise ValueError(f"{key}: expected a size such as 4GB, 1.5GiB or 512MB (or auto), got {value!r}")
    return int(float(m.group(1)) * _UNITS[unit])


def mib(n: int) -> str:
    """``n`` bytes as a DuckDB memory_limit (whole MiB)."""
    return f"{max(1, n >> 20)}MiB"
