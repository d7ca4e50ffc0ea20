"""The error of a run that cannot start or cannot finish (imported by the runner and by the checks it calls)."""
from __future__ import annotations


class RunError(Exception):
    """A run that cannot start or cannot finish, with a message meant for the user."""
