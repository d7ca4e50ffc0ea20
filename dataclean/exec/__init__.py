"""Planning tasks, running them (local process pool; Ray later), markers and resume."""
from dataclean.exec.local import LocalExecutor
from dataclean.exec.runner import RunError, RunSummary, run

__all__ = ["LocalExecutor", "RunError", "RunSummary", "run"]
