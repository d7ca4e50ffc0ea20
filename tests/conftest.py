import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data"


def with_kernels(value: str, fn):
    """``fn()`` with ``DATACLEAN_KERNELS=value`` (``"1"``: the compiled kernels, ``"0"``: numpy), then the
    variable as it was."""
    from dataclean.text import kernels

    before = os.environ.get(kernels.ENV)
    os.environ[kernels.ENV] = value
    try:
        return fn()
    finally:
        if before is None:
            del os.environ[kernels.ENV]
        else:
            os.environ[kernels.ENV] = before


def run_cli(*args, env_extra=None, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """Run the real ``dataclean`` CLI in a fresh process (own session, so failpoints kill only it)."""
    env = dict(os.environ)
    env.pop("DATACLEAN_FAILPOINTS", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "dataclean.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout, start_new_session=True)


def folder_bytes(root: Path, *subdirs: str) -> dict[str, bytes]:
    """Every file under the given subfolders of ``root``, by relative path."""
    out = {}
    for sub in subdirs:
        base = root / sub
        for path in sorted(base.rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


@pytest.fixture(scope="session")
def sample_data() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory) -> Path:
    """One real run of sample_data (default pipeline, 2 workers), shared by the modules that only read it
    (sql, stats, inspect)."""
    path = tmp_path_factory.mktemp("sample_run") / "run"
    proc = run_cli("run", SAMPLE, "-o", path, "--workers", 2, "--quiet")
    assert proc.returncode == 0, proc.stderr
    return path
