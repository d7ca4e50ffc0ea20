"""Plug-in stages (docs/plugins.md): a filter written outside dataclean, named in YAML as ``module:Class`` or by
an installed package's ``dataclean.stages`` entry point, runs like a built-in stage — in the driver, in the local
pool's workers and on Ray, with the same ledger rows, ``dataclean rules`` rows and report sections.

The plug-in is the example of docs/examples/hanspace (spaced-out Chinese). Each test copies it to its own
folder, so nothing is written into the source tree. Runs use ``python -P -m dataclean.cli``: ``-P`` keeps the
current folder off ``sys.path``, as with the ``dataclean`` command, so finding a plug-in in the current folder
is dataclean's doing, not Python's.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from conftest import REPO, folder_bytes

EXAMPLE = REPO / "docs" / "examples" / "hanspace"
COMPARED = ("data", "rejected", "stats")

#: Hand-written documents, two input files (so two pass-1 tasks), with the signal each gets by hand:
#: han_spaced_frac = spaced gaps / (spaced gaps + Han characters directly after another one).
SHARD_A = [
    ("en-plain", "The committee met on Tuesday to review the budget. Everyone agreed that the library needs new "
                 "shelves before the autumn term begins.", None),  # no Han character: not measured
    ("en-quote", "Our favourite dish in Beijing was 北京 烤鸭, served with thin pancakes and sweet bean sauce.",
     None),  # 4 Han characters < min_han 10: not measured
    ("zh-plain", "今天天气很好，我们一起去公园散步，看到很多人在湖边钓鱼。", 0.0),
    ("zh-pdf", "中 华 人 民 共 和 国 成 立 于 一 九 四 九 年 十 月 一 日 。", 1.0),  # 19 gaps of 19 pairs
]
SHARD_B = [
    ("zh-mixed", "我在用 Python 写代码，这个 API 很好用，大家都说方便。", 0.0),  # spaces next to Latin words only
    ("zh-segmented", "今天 天气 很 好 ， 我们 去 公园 散步 。", 6 / 11),  # 6 spaced gaps, 5 unspaced pairs
    ("zh-some-spaces", "北京是中国的首都，也是一座历史悠久的城市。故宫 和 长城 都很有名。", 3 / 25),
    ("zh-poem", "床前明月光\n疑是地上霜\n举头望明月\n低头思故乡", 0.0),  # line breaks are not spaces
]
REMOVED = {"zh-pdf": 1.0, "zh-segmented": 6 / 11}


def write_inputs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("a", SHARD_A), ("b", SHARD_B)):
        with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for doc_id, text, _ in rows:
                fh.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    return folder


def write_config(path: Path, stage: str, extra: str = "") -> Path:
    path.write_text(f"pipeline:\n  - stage: normalize\n  - stage: {stage}\n{extra}", encoding="utf-8")
    return path


def copy_example(tmp_path: Path) -> Path:
    dest = tmp_path / "plugin"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    return dest


def cli(*args, cwd, env_extra=None, timeout=600) -> subprocess.CompletedProcess:
    """The real CLI in a fresh process, with the current folder kept off ``sys.path`` (``-P``)."""
    env = dict(os.environ)
    env.pop("DATACLEAN_FAILPOINTS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-P", "-m", "dataclean.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout, start_new_session=True)


def ledger(out: Path) -> dict:
    t = pq.read_table(out / "rejected")
    return {r["id"]: (r["stage"], r["rule"], r["reason"], r["value"], r["threshold"]) for r in t.to_pylist()}


def kept_signals(out: Path) -> dict:
    t = pq.read_table(out / "data", columns=["id", "han_spaced_frac"])
    return dict(zip(t.column("id").to_pylist(), t.column("han_spaced_frac").to_pylist()))


def expected_ledger() -> dict:
    return {i: ("han_spacing", "han_spaced_out", "spaces between Han characters", v, 0.5) for i, v in REMOVED.items()}


def expected_kept() -> dict:
    return {i: v for i, _, v in SHARD_A + SHARD_B if i not in REMOVED}


def assert_plugin_run(proc, out: Path) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "8 records in: 6 kept, 2 removed" in proc.stdout
    assert "removed by han_spacing: 2" in proc.stdout
    assert ledger(out) == expected_ledger()
    assert kept_signals(out) == expected_kept()


# ------------------------------------------------------------------ the Filter contract, in process

def short_text_class():
    """A Filter defined outside dataclean (in this module), as a plug-in is."""
    from dataclean.stages import Filter

    class TooShort(Filter):
        """Characters of the document (removed below the threshold)."""

        kind = "too_short"
        signal = "too_short_chars"
        compare = "min"
        threshold = 20

        def compute(self, text):
            lengths = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(float)
            lengths[lengths == 0] = math.nan  # an empty document is not measured
            return lengths

    return TooShort


def test_filter_decides_by_its_threshold_per_language_and_never_on_an_unmeasured_row():
    """A Filter subclass with compare "min", a per-language threshold and NaN for "not measured": the
    pipeline keeps and removes exactly the hand-counted documents and writes the ledger's value/threshold."""
    from dataclean.pipeline import Pipeline

    cls = short_text_class()
    stage = cls(by_lang={"zh": {"threshold": 6}})
    docs = [("en-long", "en", "The library opens at nine every morning."),  # 40 chars >= 20: kept
            ("en-short", "en", "Opens at nine."),  # 14 < 20: removed
            ("en-edge", "en", "Opens at nine today."),  # exactly 20: kept (only below the bound is removed)
            ("zh-ok", "zh", "图书馆每天九点开门。"),  # 10 >= 6 (the zh threshold): kept
            ("zh-short", "zh", "开门了。"),  # 4 < 6: removed
            ("zh-as-en", None, "图书馆每天九点开门。"),  # no lang: the default 20 applies, 10 < 20: removed
            ("empty", "en", "")]  # NaN: null signal, never removed
    batch = pa.record_batch({"id": [d[0] for d in docs], "lang": [d[1] for d in docs],
                             "text": [d[2] for d in docs]})
    out = Pipeline([stage]).process(batch)
    assert out.kept.column("id").to_pylist() == ["en-long", "en-edge", "zh-ok", "empty"]
    assert out.kept.column("too_short_chars").to_pylist() == [40.0, 20.0, 10.0, None]
    removed = out.removed.select(["id", "stage", "rule", "reason", "value", "threshold"]).to_pylist()
    assert removed == [
        {"id": "en-short", "stage": "too_short", "rule": "too_short", "reason": "too_short", "value": 14.0,
         "threshold": 20.0},
        {"id": "zh-short", "stage": "too_short", "rule": "too_short", "reason": "too_short", "value": 4.0,
         "threshold": 6.0},
        {"id": "zh-as-en", "stage": "too_short", "rule": "too_short", "reason": "too_short", "value": 10.0,
         "threshold": 20.0}]
    assert stage.params() == {"threshold": 20, "by_lang": {"zh": {"threshold": 6}}}
    off = cls(threshold=None)  # null in YAML: the rule is off, the signal still computed
    out = Pipeline([off]).process(batch)
    assert out.removed.num_rows == 0
    assert out.kept.column("too_short_chars").to_pylist() == [40.0, 14.0, 20.0, 10.0, 4.0, 10.0, None]


from dataclean.stages import Check, Decisions, RuleSpec, Stage, StageResult  # noqa: E402
from dataclean.stages.base import batch_text, with_columns  # noqa: E402


class ShoutAndExclaim(Stage):
    """A plug-in written on Stage itself: two signals, two rules, decided in order."""

    kind = "shout_exclaim"
    signal_fields = [pa.field("shout_upper_frac", pa.float64()), pa.field("shout_bangs", pa.float64())]
    rule_specs = [RuleSpec("shout_upper", "shout_upper_frac", ("max_upper_frac",), "max", "upper-case share"),
                  RuleSpec("shout_bangs", "shout_bangs", ("max_bangs",), "max", "exclamation marks")]

    def __init__(self, max_upper_frac: float = 0.5, max_bangs: int = 3, name: str | None = None):
        super().__init__(name)
        self.max_upper_frac, self.max_bangs = max_upper_frac, max_bangs

    def apply(self, batch):
        text = batch_text(batch)
        upper = pc.cast(pc.count_substring_regex(text, r"\p{Lu}"), pa.float64())
        letters = pc.cast(pc.count_substring_regex(text, r"\p{L}"), pa.float64())
        frac = pc.if_else(pc.greater(letters, 0), pc.divide(upper, letters), 0.0)
        bangs = pc.cast(pc.count_substring_regex(text, "[!！]"), pa.float64())
        checks = [Check("shout_upper", "shouting", pc.greater(frac, self.max_upper_frac), frac, self.max_upper_frac),
                  Check("shout_bangs", "exclamations", pc.greater(bangs, self.max_bangs), bangs, self.max_bangs)]
        out = with_columns(batch, {"shout_upper_frac": frac, "shout_bangs": bangs})
        return StageResult(out, Decisions.from_checks(batch.num_rows, checks))


def test_a_stage_subclass_plugin_with_two_rules_by_import_path():
    """The general contract (Stage, signal_fields, rule_specs, apply -> signals + Decisions) through
    ``stage: test_plugins:ShoutAndExclaim``: the first failing rule decides, each row's own value goes to the
    ledger, every signal is computed for every row."""
    from dataclean.pipeline import Pipeline, build_stage

    stage = build_stage({"stage": "test_plugins:ShoutAndExclaim", "max_bangs": 2})
    docs = [("calm", "The meeting is at noon."),  # 1 of 18 letters upper, no bang: kept
            ("shout", "BUY NOW!!! BEST PRICE!!!"),  # 15/15 upper and 6 bangs: the first rule decides
            ("zh-bangs", "太好了！太好了！太好了！"),  # no upper-case letters, 3 full-width bangs > 2
            ("zh-calm", "今天天气很好！")]  # 1 bang: kept
    batch = pa.record_batch({"id": [d[0] for d in docs], "text": [d[1] for d in docs]})
    out = Pipeline([stage]).process(batch)
    assert out.kept.column("id").to_pylist() == ["calm", "zh-calm"]
    assert out.kept.column("shout_upper_frac").to_pylist() == [1 / 18, 0.0]
    assert out.kept.column("shout_bangs").to_pylist() == [0.0, 1.0]
    assert out.removed.select(["id", "stage", "rule", "reason", "value", "threshold"]).to_pylist() == [
        {"id": "shout", "stage": "shout_exclaim", "rule": "shout_upper", "reason": "shouting", "value": 1.0,
         "threshold": 0.5},
        {"id": "zh-bangs", "stage": "shout_exclaim", "rule": "shout_bangs", "reason": "exclamations", "value": 3.0,
         "threshold": 2.0}]


def test_yaml_threshold_and_extra_parameter_reach_the_example_plugin(tmp_path, monkeypatch):
    """``threshold:`` and the plug-in's own ``min_han:`` from a recipe entry (via build_stage, as YAML gives
    them) change its decisions on the hand-written documents; params() reports them for the manifest."""
    from dataclean.pipeline import Pipeline, build_stage

    monkeypatch.syspath_prepend(str(copy_example(tmp_path)))
    monkeypatch.delitem(sys.modules, "dataclean_hanspace", raising=False)  # (imported from this copy)
    texts = [t for _, t, _ in SHARD_A + SHARD_B]
    batch = pa.record_batch({"id": [i for i, _, _ in SHARD_A + SHARD_B], "text": texts})
    stage = build_stage({"stage": "dataclean_hanspace:HanSpacing", "threshold": 0.6, "min_han": 3})
    assert stage.params() == {"threshold": 0.6, "min_han": 3, "by_lang": {}}
    out = Pipeline([stage]).process(batch)
    assert out.removed.column("id").to_pylist() == ["zh-pdf"]  # 6/11 is not above 0.6
    # with min_han 3 the English page's 北京 烤鸭 is measured: 1 spaced gap, 2 unspaced pairs
    assert dict(zip(out.kept.column("id").to_pylist(), out.kept.column("han_spaced_frac").to_pylist()))[
        "en-quote"] == 1 / 3


# ------------------------------------------------------------------ runs through the real CLI

def test_path_form_run_removes_the_spaced_out_documents_identically_for_1_and_2_workers(tmp_path):
    """``stage: dataclean_hanspace:HanSpacing`` with the plug-in in the current folder (not on sys.path):
    the driver and the pool's workers import it; 1 and 2 workers give the same bytes; the report lists its rule."""
    plugin = copy_example(tmp_path)
    inputs = write_inputs(tmp_path / "in")
    cfg = write_config(tmp_path / "plug.yaml", "dataclean_hanspace:HanSpacing")
    outs = {}
    for workers in (1, 2):
        outs[workers] = tmp_path / f"out{workers}"
        proc = cli("run", inputs, "-o", outs[workers], "--config", cfg, "--workers", workers, "--quiet", cwd=plugin)
        assert_plugin_run(proc, outs[workers])
    assert folder_bytes(outs[1], *COMPARED) == folder_bytes(outs[2], *COMPARED)
    html = (outs[2] / "report.html").read_text(encoding="utf-8")
    # the removals table: stage, rule, reason, documents
    assert re.search(r"<td>han_spacing</td><td>(?:<a [^>]*>)?han_spaced_out(?:</a>)?</td>"
                     r"<td>spaces between Han characters</td><td class=\"num\">2</td>", html)
    assert "han_spaced_out: removed above 0.5" in html  # the signal panel, from the rule's threshold
    assert "han_spaced_out — 2 removed" in html  # the removed examples of the rule
    # inspect names the plug-in's signal and comparison, as it does for a built-in rule
    fate = cli("inspect", outs[2], "--id", "zh-segmented", cwd=plugin)
    assert fate.returncode == 0, fate.stderr
    assert re.search(r"value 0\.5455 \(han_spaced_frac\), threshold 0\.5 \[above the maximum\]", fate.stdout), \
        fate.stdout


def test_add_stages_puts_the_plugin_into_the_default_pipeline(tmp_path):
    """``add_stages:`` adds the plug-in to the whole default pipeline without restating it. Placed before
    langid it judges every document (these short ones all fall to gopher_short_doc later): it removes
    exactly the two spaced-out ones, and every document, kept or removed, carries its signal."""
    plugin = copy_example(tmp_path)
    inputs = write_inputs(tmp_path / "in")
    cfg = tmp_path / "add.yaml"
    cfg.write_text("add_stages:\n  - stage: dataclean_hanspace:HanSpacing\n    before: langid\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = cli("run", inputs, "-o", out, "--config", cfg, "--workers", 2, "--quiet", cwd=plugin)
    assert proc.returncode == 0, proc.stderr
    rows = {i: r for i, r in ledger(out).items() if r[0] == "han_spacing"}
    assert rows == expected_ledger()
    signals = {}
    for folder in ("data", "rejected"):
        t = pq.read_table(out / folder, columns=["id", "han_spaced_frac"])
        signals.update(zip(t.column("id").to_pylist(), t.column("han_spaced_frac").to_pylist()))
    assert signals == {i: v for i, _, v in SHARD_A + SHARD_B}
    shown = cli("config", "show", "--config", cfg, cwd=plugin)
    kinds = [s["stage"] for s in yaml.safe_load(shown.stdout)["pipeline"]]
    assert kinds[:3] == ["normalize", "dataclean_hanspace:HanSpacing", "langid"] and len(kinds) > 10


@pytest.mark.slow
def test_ray_run_of_a_plugin_is_byte_identical_to_the_local_pool(tmp_path):
    """The same plug-in run on a local Ray cluster of 2 CPUs: Ray's workers import it too, and the output is the
    local pool's, byte for byte."""
    plugin = copy_example(tmp_path)
    inputs = write_inputs(tmp_path / "in")
    cfg = write_config(tmp_path / "plug.yaml", "dataclean_hanspace:HanSpacing")
    local, ray = tmp_path / "local", tmp_path / "ray"
    assert_plugin_run(cli("run", inputs, "-o", local, "--config", cfg, "--workers", 2, "--quiet", cwd=plugin), local)
    proc = cli("run", inputs, "-o", ray, "--config", cfg, "--workers", 2, "--executor", "ray", "--quiet", cwd=plugin)
    assert_plugin_run(proc, ray)
    assert json.loads((ray / "manifest.json").read_text())["executor"] == "ray"
    assert folder_bytes(local, *COMPARED) == folder_bytes(ray, *COMPARED)


DRIVER = """
import sys
from dataclean.exec.local import prestart
import dataclean

prestart(2)  # the local pool's fork server starts now, with a sys.path that lacks the plug-in's folder
sys.path.append({plugin!r})  # only the driver can import the plug-in from here on
cfg = {{"pipeline": [{{"stage": "normalize"}}, {{"stage": "dataclean_hanspace:HanSpacing"}}]}}
summary = dataclean.run({inputs!r}, {out!r}, config=cfg, workers=2, executor={executor!r})
print(summary.input_records, summary.kept, summary.removed, summary.failed_inputs)
"""


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_workers_import_a_plugin_from_a_folder_the_driver_added_to_sys_path(tmp_path, executor):
    """A library user adds the plug-in's folder to ``sys.path`` at run time, from a current folder that does
    not hold it, after the local pool's fork server started. Ray's workers never see that sys.path: they import
    the plug-in from the folder the driver writes into each task's recipe entry (``plugin_path``); the local
    pool's workers get the driver's sys.path from multiprocessing. Both remove exactly what the driver would."""
    plugin = copy_example(tmp_path)
    inputs = write_inputs(tmp_path / "in")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    script = DRIVER.format(plugin=str(plugin), inputs=str(inputs), out=str(out), executor=executor)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, cwd=elsewhere,
                          env=env, timeout=600, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "8 6 2 []"
    assert ledger(out) == expected_ledger()
    assert kept_signals(out) == expected_kept()


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory) -> Path:
    """The example package pip-installed (its pyproject.toml as written) into a folder of its own."""
    root = tmp_path_factory.mktemp("installed")
    src = copy_example(root)
    target = root / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return target


def test_entry_point_form_from_the_installed_example_package(installed_plugin, tmp_path):
    """``stage: han_spacing`` finds the class through the ``dataclean.stages`` entry point of the installed
    package (run from a folder that does not hold it), with 2 workers; the same decisions as the path form;
    ``dataclean rules`` lists its rule with the class that runs it."""
    declared = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared == {"dataclean.stages": {"han_spacing": "dataclean_hanspace:HanSpacing"}}
    inputs = write_inputs(tmp_path / "in")
    cfg = write_config(tmp_path / "plug.yaml", "han_spacing")
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(installed_plugin)])}
    out = tmp_path / "out"
    proc = cli("run", inputs, "-o", out, "--config", cfg, "--workers", 2, "--quiet", cwd=tmp_path, env_extra=env)
    assert_plugin_run(proc, out)
    rules = cli("rules", "--config", cfg, "--format", "json", cwd=tmp_path, env_extra=env)
    assert rules.returncode == 0, rules.stderr
    rows = [r for r in json.loads(rules.stdout) if r["stage"] == "han_spacing"]
    assert rows == [{"stage": "han_spacing", "kind": "han_spacing", "rule": "han_spaced_out",
                     "signal": "han_spaced_frac", "compare": "max", "thresholds": {"threshold": 0.5}, "by_lang": {},
                     "sources": "all", "file": str(cfg),
                     "doc": "Share of adjacent Han characters that have spaces between them (spaced-out or "
                            "word-segmented Chinese).",
                     "plugin": "dataclean_hanspace:HanSpacing"}]


def test_plugin_digest_follows_the_plugin_source(tmp_path, monkeypatch):
    """What a run fingerprint needs to notice an edited plug-in: the sha256 of the module defining each
    plug-in class, by entry; built-in stages have none (dataclean's version covers them)."""
    import hashlib

    from dataclean.stages import plugin_digest

    site = copy_example(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "dataclean_hanspace", raising=False)  # (imported from this copy)
    cfg = {"pipeline": [{"stage": "normalize"}, {"stage": "dataclean_hanspace:HanSpacing"}]}
    source = site / "dataclean_hanspace.py"
    before = plugin_digest(cfg)
    assert before == {"dataclean_hanspace:HanSpacing": hashlib.sha256(source.read_bytes()).hexdigest()}
    source.write_text(source.read_text(encoding="utf-8") + "# an edit\n", encoding="utf-8")
    after = plugin_digest(cfg)
    assert after["dataclean_hanspace:HanSpacing"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert after != before


def test_a_rerun_after_editing_the_plugin_refuses_the_folder_instead_of_resuming(tmp_path):
    """The run fingerprint holds the plug-in's source: the same command after an edit (the default threshold
    raised to 0.6) is refused in one line, and with --fresh it decides by the new code (6/11 is kept)."""
    plugin = copy_example(tmp_path)
    inputs = write_inputs(tmp_path / "in")
    cfg = write_config(tmp_path / "plug.yaml", "dataclean_hanspace:HanSpacing")
    out = tmp_path / "out"
    args = ("run", inputs, "-o", out, "--config", cfg, "--workers", 2, "--quiet")
    assert_plugin_run(cli(*args, cwd=plugin), out)
    assert cli(*args, cwd=plugin).returncode == 0  # (unchanged: a finished run, nothing to do)
    source = plugin / "dataclean_hanspace.py"
    text = source.read_text(encoding="utf-8")
    old = "threshold: float | None = 0.5,"
    assert text.count(old) == 1
    source.write_text(text.replace(old, "threshold: float | None = 0.6,"), encoding="utf-8")
    again = cli(*args, cwd=plugin)
    assert again.returncode == 2 and len(again.stderr.splitlines()) == 1, again.stderr
    assert "different configuration" in again.stderr and "--fresh" in again.stderr
    fresh = cli(*args, "--fresh", cwd=plugin)
    assert fresh.returncode == 0, fresh.stderr
    assert ledger(out) == {"zh-pdf": ("han_spacing", "han_spaced_out", "spaces between Han characters", 1.0, 0.6)}


def fake_dist(site: Path, name: str, entry_points: str) -> None:
    """An installed distribution as pip leaves it on disk (``NAME-VERSION.dist-info`` with ``METADATA`` and
    ``entry_points.txt``), for importlib.metadata to find on sys.path."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[dataclean.stages]\n{entry_points}\n")


def test_entry_points_never_replace_a_built_in_and_a_name_registered_twice_is_refused(tmp_path, monkeypatch):
    """An entry point named like a built-in stage is not used (``normalize`` stays dataclean's); a name two
    packages register is a one-line error naming both; a free name loads its class."""
    from dataclean.stages import REGISTRY, resolve_stage

    site = copy_example(tmp_path)  # holds dataclean_hanspace.py
    fake_dist(site, "pkg_one", "normalize = dataclean_hanspace:HanSpacing\nhan_a = dataclean_hanspace:HanSpacing\n"
                               "twice = dataclean_hanspace:HanSpacing")
    fake_dist(site, "pkg_two", "twice = dataclean_hanspace:HAN_RUN")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "dataclean_hanspace", raising=False)  # (imported from this copy)
    assert resolve_stage("normalize") is REGISTRY["normalize"]
    assert resolve_stage("han_a").__name__ == "HanSpacing"
    with pytest.raises(ValueError) as exc:
        resolve_stage("twice")
    assert str(exc.value) == ("stage twice: several installed packages register it in dataclean.stages: "
                              "dataclean_hanspace:HAN_RUN (package pkg_two 1.0); dataclean_hanspace:HanSpacing "
                              "(package pkg_one 1.0); uninstall all but one")


# ------------------------------------------------------------------ user mistakes: one line each

MISTAKES = textwrap.dedent('''
    from dataclean.stages import Filter, Stage

    class NotAStage:
        pass

    class NoKind(Filter):
        signal = "x_value"
        def compute(self, text):
            return [0.0] * len(text)

    class BuiltinKind(Filter):
        kind = "gopher_quality"
        signal = "x_value"
        def compute(self, text):
            return [0.0] * len(text)

    class NoSignal(Filter):
        kind = "no_signal"
        def compute(self, text):
            return [0.0] * len(text)

    class Crashes(Filter):
        kind = "crashes"
        signal = "crashes_value"
        def compute(self, text):
            return [1 / 0 for _ in text]

    class OneShort(Filter):
        kind = "one_short"
        signal = "one_short_value"
        def compute(self, text):
            return [0.0] * (len(text) - 1)

    class Words(Filter):
        kind = "words"
        signal = "words_value"
        def compute(self, text):
            return ["many"] * len(text)
''')


@pytest.mark.parametrize("entry, message", [
    ("dataclean_hanspace:HanSpacin",
     "stage dataclean_hanspace:HanSpacin: module dataclean_hanspace has no HanSpacin (did you mean HanSpacing?)"),
    ("no_such_pkg.filters:MyFilter",
     "stage no_such_pkg.filters:MyFilter: no module named no_such_pkg (looked on sys.path and in the current "
     "folder {cwd}); install its package, run from the folder that holds it or add that folder to PYTHONPATH"),
    ("needs_dep:Anything", "stage needs_dep:Anything: module needs_dep needs module not_installed_dep, which is "
                           "not installed"),
    ("broken:Anything", "stage broken:Anything: importing broken failed: SyntaxError: invalid syntax (broken.py, "
                        "line 1)"),
    ("mistakes:NotAStage", "stage mistakes:NotAStage: NotAStage is not a stage class; subclass "
                           "dataclean.stages.Filter (one signal, one threshold) or dataclean.stages.Stage"),
    ("mistakes:NoKind", "stage mistakes:NoKind: class NoKind must set kind = \"some_name\" (an identifier: the "
                        "stage's name in the ledger, the report and dataclean rules), got ''"),
    ("mistakes:BuiltinKind", "stage mistakes:BuiltinKind: class BuiltinKind has kind 'gopher_quality', a built-in "
                             "stage's; give it its own kind"),
    ("mistakes:NoSignal", "stage mistakes:NoSignal: class NoSignal must set signal = \"column_name\" (the column "
                          "its compute() fills), got ''"),
    ("mistakes:Crashes", "stage 'mistakes:Crashes': Crashes.compute failed on a test batch: ZeroDivisionError: "
                         "division by zero"),
    ("mistakes:OneShort", "stage one_short: OneShort.compute returned 2 values for 3 documents; return one per "
                          "document, in order"),
    ("mistakes:Words", "stage words: Words.compute must return numbers (or None), one per document: Could not "
                       "convert 'many' with type str: tried to convert to double"),
    ("dataclean_hanspace:HanSpacing\n    threshold: high",
     "stage 'han_spacing': threshold must be a number (or null to switch the rule off), got 'high'"),
    ("dataclean_hanspace:HanSpacing\n    min_han: 1", "han_spacing: min_han must be an integer >= 2, got 1"),
    ("dataclean_hanspace:HanSpacing\n    thresold: 0.3",
     "stage 'dataclean_hanspace:HanSpacing': unknown parameter(s) thresold (accepted: by_lang, min_han, name, "
     "threshold)"),
    ("han_spacng", "unknown stage 'han_spacng' (known stages: {known}; or a plug-in as module:Class)"),
])
def test_a_plugin_mistake_is_one_line_naming_the_fix(tmp_path, entry, message):
    """Each mistake in writing or naming a plug-in stops ``dataclean run`` before any work with exit 2 and one
    line naming the entry and the fix: no traceback, no output folder."""
    from dataclean.stages import REGISTRY

    work = copy_example(tmp_path)
    (work / "mistakes.py").write_text(MISTAKES, encoding="utf-8")
    (work / "needs_dep.py").write_text("import not_installed_dep\n", encoding="utf-8")
    (work / "broken.py").write_text("class Broken(:\n", encoding="utf-8")
    inputs = write_inputs(tmp_path / "in")
    cfg = write_config(tmp_path / "bad.yaml", entry)
    out = tmp_path / "out"
    proc = cli("run", inputs, "-o", out, "--config", cfg, "--quiet", cwd=work)
    expected = message.format(cwd=work, known=", ".join(sorted(REGISTRY)))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: pipeline[1]: {expected}\n")
    assert not out.exists()
