"""``dataclean.run`` as a library, the way a first user calls it: from a plain script without
``if __name__ == "__main__":``, from a session whose ``__main__`` has no file (``python -c``, stdin: what a
notebook is to ``multiprocessing``), and from a worker thread; a dict config resolved like the YAML file of the
same content; and no DuckDB progress bar in the caller's output.

Every run is a real ``python`` subprocess with two workers on the same seven hand-written documents (two JSONL
files, so the pool is used): English and Chinese, one English and one Chinese exact duplicate, one blank text.
Their source is ``books`` (curated: no Gopher/C4/FineWeb length rules), so the only removals are the two
duplicates (``exact_dedup``) and the blank document (``normalize/empty``): 4 kept, 3 removed.

DuckDB prints its progress bar only for a query that runs over 2 s (``progress_bar_time``), which no query on
seven documents does. The subprocesses therefore load :data:`SLOW_QUERIES` as ``sitecustomize``: it makes every
query of a connection whose bar is on count as slow (``progress_bar_time = 0``), so a bar that a big run would
print shows here; a connection whose bar is off stays as it was.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EN = [
    {"id": "en-1", "source": "books", "text": "The river runs past the old mill at the edge of the village."},
    {"id": "en-2", "source": "books", "text": "Our library opens at nine in the morning and closes at six."},
    {"id": "en-3", "source": "books", "text": "The river runs past the old mill at the edge of the village."},
    {"id": "en-4", "source": "books", "text": "   "},
]
ZH = [
    {"id": "zh-1", "source": "books", "text": "今天早上我去市场买了新鲜的蔬菜和水果。"},
    {"id": "zh-2", "source": "books", "text": "这家餐厅的服务非常好，菜的味道也很不错。"},
    {"id": "zh-3", "source": "books", "text": "今天早上我去市场买了新鲜的蔬菜和水果。"},
]
#: What the summary of a run of EN + ZH says (see the module docstring).
EXPECTED = "RESULT 7 4 3 {'exact_dedup/exact_duplicate': 2, 'normalize/empty': 1} True"

SLOW_QUERIES = '''
"""Test hook: once duckdb is imported (normally, where the code imports it), every connection whose progress bar
is on gets progress_bar_time = 0 just before its first statement that is not a SET, so its bar is printed for
any query. (Setting progress_bar_time turns the bar on: it is set only where the bar is on already.)"""
import importlib.abc
import importlib.util
import sys


class _Connection:
    def __init__(self, con):
        self._con, self._armed = con, False

    def execute(self, sql, *args, **kwargs):
        if not self._armed and not str(sql).lstrip().upper().startswith("SET "):
            self._armed = True
            if self._con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0]:
                self._con.execute("SET progress_bar_time = 0")
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._con, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._con.close()


def _patch(module):
    connect = module.connect

    def slow_connect(*args, **kwargs):
        return _Connection(connect(*args, **kwargs))

    module.connect = slow_connect


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "duckdb":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("duckdb")
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
'''

TIMEOUT = 300  # s, per subprocess (a run here takes ~3 s; pytest-timeout is not a dependency)


def _inputs(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for name, docs in (("en", EN), ("zh", ZH)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs),
                                             encoding="utf-8")
    return folder


def _env(tmp_path: Path) -> dict:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SLOW_QUERIES)
    env = dict(os.environ)
    env.pop("DATACLEAN_FAILPOINTS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(hook)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _python(tmp_path: Path, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, cwd=tmp_path,
                          env=_env(tmp_path), timeout=TIMEOUT)


def _code(body: str) -> str:
    return textwrap.dedent(body).replace("REPORT", 'print("RESULT", s.input_records, s.kept, s.removed, '
                                                   's.removed_by_rule, s.verified)')


def _assert_clean_run(proc: subprocess.CompletedProcess, out: Path) -> None:
    """Exit 0, the summary of EN + ZH and nothing else on stdout or stderr (no traceback, no progress bar)."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == EXPECTED + "\n"
    assert proc.stderr == ""
    assert (out / "manifest.json").is_file()
    assert sorted(p.name for p in (out / "data").glob("*.parquet"))  # the kept documents' shards
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["executor"], manifest["workers"]) == ("local", 2)


SCRIPT = """
    import dataclean
    s = dataclean.run(["in"], "out", workers=2)
    REPORT
    """


def test_a_plain_script_without_a_main_guard(tmp_path):
    """Fails on main: every worker ran the script again and died bootstrapping (BrokenProcessPool, RunError)."""
    _inputs(tmp_path)
    (tmp_path / "clean.py").write_text(_code(SCRIPT))
    _assert_clean_run(_python(tmp_path, ["clean.py"]), tmp_path / "out")


def _session(tmp_path: Path, how: str) -> subprocess.CompletedProcess:
    code = _code(SCRIPT)
    return _python(tmp_path, ["-c", code]) if how == "-c" else _python(tmp_path, ["-"], stdin=code)


@pytest.mark.parametrize("how", ["-c", "stdin"])
def test_b_a_session_whose_main_has_no_file(tmp_path, how):
    """``python -c`` and stdin, as a notebook: ``multiprocessing`` imports no main module there (this passed on
    main already; it guards the workers' context of :func:`dataclean.exec.local._context_without_main`)."""
    _inputs(tmp_path)
    proc = _session(tmp_path, how)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == EXPECTED
    assert proc.stderr == ""
    assert (tmp_path / "out" / "manifest.json").is_file()
    assert sorted(p.name for p in (tmp_path / "out" / "data").glob("*.parquet"))


def test_b_a_session_prints_no_progress_bar(tmp_path):
    """DuckDB turns its progress bar on where ``__main__`` has no file (it takes the session for an interactive
    one): the run's own connections turn it off. Fails on main: the bar of the global step's queries."""
    _inputs(tmp_path)
    _assert_clean_run(_session(tmp_path, "-c"), tmp_path / "out")


THREAD = """
    import threading
    import dataclean
    result = {}
    def clean():
        result["summary"] = dataclean.run(["in"], "out", workers=2)
    thread = threading.Thread(target=clean)
    thread.start()
    thread.join()
    s = result["summary"]
    REPORT
    """


@pytest.mark.parametrize("guard", [False, True])
def test_c_a_run_in_a_worker_thread(tmp_path, guard):
    """Fails on main without the guard (as the plain script); with it, on the workers' progress bars (the fork
    server imports duckdb where ``__main__`` has no file, so the bar is on in every worker)."""
    _inputs(tmp_path)
    code = _code(THREAD)
    if guard:
        code = "if __name__ == '__main__':\n" + textwrap.indent(code, "    ")
    (tmp_path / "clean.py").write_text(code)
    _assert_clean_run(_python(tmp_path, ["clean.py"]), tmp_path / "out")


PIPELINE = [{"stage": "normalize"}, {"stage": "exact_dedup"}]


def test_a_dict_config_is_resolved_like_the_yaml_file_of_the_same_content(tmp_path):
    """``config={"pipeline": [...]}`` is merged onto the defaults like ``config="file.yaml"``: the same run, the
    same bytes. Fails on main: the dict skipped the merge (``KeyError: 'rejected_text'``)."""
    import yaml

    _inputs(tmp_path)
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"pipeline": PIPELINE}))
    code = _code(f"""
        import dataclean
        s = dataclean.run(["in"], "out-dict", config={{"pipeline": {PIPELINE!r}}}, workers=2)
        REPORT
        s = dataclean.run(["in"], "out-yaml", config="mine.yaml", workers=2)
        REPORT
        """)
    (tmp_path / "clean.py").write_text(code)
    proc = _python(tmp_path, ["clean.py"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == (EXPECTED + "\n") * 2
    for sub in ("data", "rejected"):
        shards = {p.name: p.read_bytes() for p in sorted((tmp_path / "out-dict" / sub).glob("*.parquet"))}
        assert shards, sub
        assert shards == {p.name: p.read_bytes() for p in sorted((tmp_path / "out-yaml" / sub).glob("*.parquet"))}
    dict_manifest = json.loads((tmp_path / "out-dict" / "manifest.json").read_text())
    yaml_manifest = json.loads((tmp_path / "out-yaml" / "manifest.json").read_text())
    assert dict_manifest["config_hash"] == yaml_manifest["config_hash"]


def test_cli_quiet_prints_no_progress_bar(tmp_path):
    """``dataclean run --quiet`` prints its summary and nothing from DuckDB. Fails on main: the reduce tasks'
    queries in the workers print DuckDB's bar (\\r) on the command's stdout."""
    _inputs(tmp_path)
    proc = _python(tmp_path, ["-m", "dataclean.cli", "run", "in", "-o", "out", "--workers", "2", "--quiet"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\r" not in proc.stdout and "\r" not in proc.stderr
    assert proc.stdout.splitlines()[0].startswith("7 records in: 4 kept, 3 removed (")
    assert proc.stderr == ""


SCRIPT_STAGE = """
    import dataclean
    from dataclean.stages import REGISTRY, Filter

    class Shouty(Filter):
        \"\"\"Share of upper-case letters.\"\"\"
        kind = "shouty"
        signal = "shouty_ratio"
        threshold = 0.5

        def compute(self, text):
            return [sum(c.isupper() for c in t) / max(1, len(t)) for t in text.to_pylist()]

    REGISTRY["shouty"] = Shouty
    PIPELINE = [{"stage": "normalize"}, {"stage": "shouty"}, {"stage": "exact_dedup"}]
    """


@pytest.mark.parametrize("guard", [True, False])
def test_a_stage_class_defined_in_the_script_needs_the_guard(tmp_path, guard):
    """The one case where the workers import the script: its pipeline has a stage class defined there (they
    build their stages by name from REGISTRY). With the guard it runs (no document is shouty: the counts of EN +
    ZH); without it the run stops at once with the one line naming the guard. Fails on main without the guard:
    three pools broke, then "lower --workers"."""
    _inputs(tmp_path)
    call = 's = dataclean.run(["in"], "out", config={"pipeline": PIPELINE}, workers=2)\nREPORT\n'
    code = _code(SCRIPT_STAGE) + ("if __name__ == '__main__':\n" + textwrap.indent(_code(call), "    ")
                                  if guard else _code(call))
    (tmp_path / "clean.py").write_text(code)
    proc = _python(tmp_path, ["clean.py"])
    if guard:
        _assert_clean_run(proc, tmp_path / "out")
        return
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == (
        "dataclean.exec.errors.RunError: the workers' pool broke before any task ran (exit code 1); each worker "
        f"imports {tmp_path / 'clean.py'} first: put the code that runs at its top level under "
        '`if __name__ == "__main__":`')
