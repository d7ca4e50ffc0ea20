"""Fault injection for the resume and write-failure tests, driven by ``DATACLEAN_FAILPOINTS``: a comma-separated
list of entries. Unset (always, outside tests), a failpoint costs one environment lookup.

* ``NAME`` (e.g. ``pass1-done-1``, ``global-mid``): the run SIGKILLs its whole process group when it reaches
  the point of that name (:func:`failpoint`).
* ``die-once:NAME``: the process that reaches the point SIGKILLs itself alone (a worker dying, not the run),
  the first time only: a file ``NAME`` created in ``DATACLEAN_FAILPOINT_STATE`` (a folder) remembers it, so the
  retried task passes.
* ``die-always:NAME``: the process that reaches the point SIGKILLs itself alone, every time (a worker the OOM
  killer takes on every attempt).
* ``pause:NAME``: the process that reaches the point sleeps ``DATACLEAN_FAILPOINT_PAUSE`` seconds (60), so
  that a test can signal a run that is surely at that point (Ctrl-C in pass 1).
* ``write-fail:GLOB``: a writer about to write a file whose path matches ``GLOB`` (``fnmatch`` on the final
  path, e.g. ``*/data/part-00001-*``) raises ``OSError(ENOSPC)`` after the temporary file was opened, as a
  full disk would (:func:`write_failpoint`).
"""
from __future__ import annotations

import errno
import fnmatch
import os
import signal
import time

WRITE_FAIL = "write-fail:"
DIE_ONCE = "die-once:"
DIE_ALWAYS = "die-always:"
PAUSE = "pause:"


def failpoint(name: str) -> None:
    spec = os.environ.get("DATACLEAN_FAILPOINTS")
    if not spec:
        return
    entries = spec.split(",")
    if name in entries:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    if PAUSE + name in entries:
        time.sleep(float(os.environ.get("DATACLEAN_FAILPOINT_PAUSE", "60")))
    if DIE_ALWAYS + name in entries:
        os.kill(os.getpid(), signal.SIGKILL)
    if DIE_ONCE + name in entries:
        try:  # O_EXCL: of several processes reaching the point, one dies
            os.close(os.open(os.path.join(os.environ["DATACLEAN_FAILPOINT_STATE"], name),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)


def write_failpoint(path: str) -> None:
    """Raise ``OSError(ENOSPC)`` when a ``write-fail:GLOB`` entry matches ``path`` (the file being written)."""
    spec = os.environ.get("DATACLEAN_FAILPOINTS")
    if not spec or WRITE_FAIL not in spec:
        return
    for entry in spec.split(","):
        if entry.startswith(WRITE_FAIL) and fnmatch.fnmatch(path, entry[len(WRITE_FAIL):]):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC) + " (injected by DATACLEAN_FAILPOINTS)", path)
