"""Compile every family of numba kernels into the disk cache and mark each ready: ``python -m dataclean.warm``.

The first process that needs a kernel whose family is not marked ready starts this in the background
(:func:`dataclean.text.kernels.ready`) and runs the equivalent pyarrow/numpy code meanwhile, so a user's first
run never waits for the compilation (about a minute of CPU on a 2-core machine). Run it by hand (or in a
Dockerfile, after ``pip install``) to have the kernels from the first run on; it prints which families are
in use. With ``--lock FILE`` (how the background start calls it) it runs at the lowest CPU priority and
removes ``FILE`` when it ends.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def warm_all() -> dict[str, bool]:
    """Compile or load the text, MinHash and script-folding kernels; which of them are in use."""
    from dataclean.dedup import minhash
    from dataclean.text import kernels, script_fold

    kernels.allow_compile()
    _warm_callers()
    return {"text": kernels.warm_up(), "minhash": minhash.warm_up(), "fold": script_fold.warm_up()}


def _warm_callers() -> None:
    """The kernels as the stages call them (numba compiles one version per argument type, and a read-only
    array is another type), before the families' own warm-ups mark them ready:
    ``tests/test_warm.py`` checks that a default run then compiles nothing."""
    import numpy as np
    import pyarrow as pa

    from dataclean import tokens
    from dataclean.dedup import keys, minhash

    texts = pa.array(["a b\n\nc", "中文 12 $"], pa.string())
    tokens.token_features(texts)
    tokens.estimate_tokens(texts)
    keys.xxh3_64_of(texts)
    if minhash.kernels_enabled():
        minhash.mh_kernels().components(2, np.array([0], np.int64), np.array([1], np.int64))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dataclean.warm", description=__doc__.splitlines()[0])
    ap.add_argument("--lock", help="the lock file of a background warm-up, removed at the end")
    args = ap.parse_args(argv)
    if args.lock:
        try:
            os.nice(19)  # (the run that started it goes first)
        except OSError:
            pass
    start = time.time()
    try:
        used = warm_all()
    finally:
        if args.lock:
            try:
                os.unlink(args.lock)
            except OSError:
                pass
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} pid {os.getpid()}: kernels in use: "
          + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in used.items())
          + f" ({time.time() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
