"""Fault injection for the resume tests: ``DATACLEAN_FAILPOINTS=name[,name…]`` makes the run SIGKILL its
whole process group when it reaches a named point. Unset (always, outside tests), a failpoint costs one
environment lookup."""
from __future__ import annotations

import os
import signal


def failpoint(name: str) -> None:
    spec = os.environ.get("DATACLEAN_FAILPOINTS")
    if spec and name in spec.split(","):
        os.killpg(os.getpgrp(), signal.SIGKILL)
