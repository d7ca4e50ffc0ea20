"""One run per output folder: an OS lock that dies with the process holding it.

The lock is ``fcntl.flock`` on ``OUT/.dataclean-run.lock``, taken without waiting. The kernel releases it
when its holder exits in any way (SIGKILL and OOM kills included), so a crashed run never leaves a stale
lock behind and the next run needs no clean-up. The file also holds the holder's pid, host and start
time, for the one line the second run gets (exit 2). The file stays in the folder (``--fresh`` does not
remove it): removing a lock file while another process has it open would let two runs each lock a
different file of the same name.

Where there is no ``fcntl`` (Windows), there is no lock, and the README says so.
"""
from __future__ import annotations

import json
import os
import socket
import time

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None  # type: ignore[assignment]

from dataclean.exec.errors import RunError
from dataclean.io.writers import write_error

LOCK_FILE = ".dataclean-run.lock"


class RunLock:
    """The lock of the output folder ``folder``, held from :meth:`acquire` until :meth:`release` (or exit)."""

    def __init__(self, folder: str, create: bool = True, hint: str = ", or choose another output folder"):
        """``create``: make the folder and the lock file when missing (a run); else lock only a folder that
        has one (``dataclean report``: a folder no run locked has no run to wait for). ``hint`` ends the
        line of a refusal."""
        self.folder, self.create, self.hint = folder, create, hint
        self.path = os.path.join(folder, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        """Create the folder if needed and lock it; raise :class:`RunError` naming the holder when another
        process holds the lock, and :class:`~dataclean.io.writers.WriteError` when the folder or the lock
        file cannot be created (a read-only parent, no space)."""
        try:
            if not self.create and not os.path.isfile(self.path):
                return self
            os.makedirs(self.folder, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise write_error(self.path if os.path.isdir(self.folder) else self.folder, exc) from None
        if fcntl is None:  # pragma: no cover
            self._fd = fd
            return self
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunError(f"output folder {self.folder} is in use by another dataclean run{holder}; wait for it "
                           f"to finish{self.hint}") from None
        except OSError as exc:  # a file system without locks (some network mounts)
            os.close(fd)
            raise RunError(f"cannot lock the output folder {self.folder}: {os.strerror(exc.errno or 0)} "
                           "(a file system without file locks?); choose a local output folder") from None
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, info + b"\n", 0)
        except OSError:  # (the lock holds without its note; the second run then names no pid)
            pass
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    """`` (pid 123 on host, started 2026-12-02 06:30:00 UTC)`` from the lock file, or ``""``."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(info["started"])))
        return f" (pid {int(info['pid'])} on {info['host']}, started {started})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""
