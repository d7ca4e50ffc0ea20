"""Where the rules folder is, and the error a configuration problem raises.

At the bottom of the house (it imports nothing of dataclean), so that the stages and scorers that read a list
or a weights file from the rules folder need not import :mod:`dataclean.config`, which builds stages.
"""
from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """A configuration problem, with the offending key in the message."""


def rules_dir() -> Path:
    """The rules folder: ``<repo>/rules`` in a source tree (editable installs), ``dataclean/_rules`` in a wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "rules", here / "_rules"):
        if (candidate / "default.yaml").is_file():
            return candidate
    raise ConfigError("cannot find the default rules folder (rules/default.yaml)")
