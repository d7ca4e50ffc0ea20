"""What every ``dataclean`` command's help says alike: the exit codes and the examples at the end of ``--help``.
Beside the CLI's modules at the bottom (no imports), so that the ``quality`` command group, which lives with the
quality scorers, shares them without importing :mod:`dataclean.cli`."""
from __future__ import annotations

#: Exit codes, the same meaning in every command (each command's ``--help`` lists the ones it uses):
#: 1 the command did its work and found a problem (a gate failed, an id not found, verification failed,
#: an input unreadable); 2 it could not start or do its work (bad usage, a config error, not a finished run,
#: out of memory); 3 a write failed (disk full, read-only: the same command resumes).
EXIT_PROBLEM_FOUND = 1
EXIT_CANNOT_START = 2
EXIT_WRITE_FAILED = 3
#: The exit code of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it.
EXIT_INTERRUPTED = 130


def epilog(examples: list[str], codes: dict[int, str]) -> str:
    """The end of a command's ``--help``: examples to copy, and what each exit code means for it (with the
    two every command shares: out of memory exits 2, Ctrl-C 130). Why: a first-time user reads ``--help``
    before any page, and a script needs the codes."""
    codes = {0: "done", **codes}
    codes.setdefault(EXIT_CANNOT_START, "bad usage")
    codes[EXIT_CANNOT_START] += "; also out of memory"
    codes[EXIT_INTERRUPTED] = "interrupted (Ctrl-C): one line on stderr, no traceback"
    lines = ["\b", "Examples:", *(f"  {e}" for e in examples), "", "\b", "Exit codes:"]
    lines += [f"  {code:<4}{what}" for code, what in sorted(codes.items())]
    return "\n".join(lines)
