#!/usr/bin/env bash
# Create a separate virtual environment with datatrove for benchmarks/bench_rules.py.
#
#   benchmarks/setup_datatrove.sh VENV_DIR            # e.g. benchmarks/setup_datatrove.sh /work/dtvenv
#   python benchmarks/bench_rules.py --datatrove-python VENV_DIR/bin/python
#
# Installs from PyPI: datatrove with its "processing" extra (the filters' dependencies: nltk, regex, ...),
# spaCy (datatrove's English word tokenizer is spaCy's blank "en" pipeline: no model download is needed)
# and pyarrow (its Parquet reader/writer). datatrove must not share dataclean's environment: the benchmark
# runs it only through VENV_DIR/bin/python. The measured runs used datatrove 0.10.1 and spaCy 3.8.x; pin
# with e.g. DATATROVE_SPEC='datatrove[processing]==0.10.1'. PYTHON selects the interpreter (default python3,
# which must be 3.10 or newer).
set -euo pipefail

if [ $# -ne 1 ] || [ "${1:0:1}" = "-" ]; then
    echo "usage: $0 VENV_DIR" >&2
    exit 2
fi
VENV=$1
PYTHON=${PYTHON:-python3}
DATATROVE_SPEC=${DATATROVE_SPEC:-datatrove[processing]}

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install "$DATATROVE_SPEC" spacy pyarrow

# Smoke test: the four filters of the chain load, and the English word tokenizer works without downloads.
"$VENV/bin/python" - <<'EOF'
from importlib.metadata import version

from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)
from datatrove.utils.typeshelper import Languages
from datatrove.utils.word_tokenizers import load_word_tokenizer

words = load_word_tokenizer(Languages.english).word_tokenize("The quick brown fox jumps over the lazy dog.")
assert len(words) >= 9, words
chain = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter()]
print("ok: datatrove", version("datatrove"), "spacy", version("spacy"), "pyarrow", version("pyarrow"))
EOF
echo "use: python benchmarks/bench_rules.py --datatrove-python $VENV/bin/python"
