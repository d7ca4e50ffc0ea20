#!/usr/bin/env python3
"""Rebuild sample_data/ (the Quickstart shards) from the dataclean benchmark corpus.

Usage
    python sample_data/build_sample.py --corpus /work/shared/corpus [--out sample_data]

Reads only <corpus>/bench/part-*.parquet (all 258,156 documents; jsonl/ holds copies of two bench
shards and is not read). Writes, under --out (default: the directory of this script):

    web-en.parquet           dolma-cc, spamassassin, datajuicer-demos (source "web")
    docs-code.parquet        python-docs, cpython-3.11-stdlib, go-1.19-src, rust-1.63-std
    zh-wiki-docs.jsonl.zst   cmrc2018 (zh Wikipedia, CC-BY-SA-4.0), libreoffice-help zh-CN/zh-TW (MPL-2.0)
    papers.jsonl.zst         datajuicer-demos arXiv / NIH ExPorter / USPTO samples (source "papers")

Only origins whose licence allows redistribution are read (ALLOWED below); research-only origins and
all other copyleft origins are never loaded. Documents longer than MAX_CHARS characters are skipped.

Selection is deterministic: inside each (origin, stratum) the candidates are sorted by sha256(id) and
the first N are taken. For dolma-cc every document whose exact text occurs more than once in the
origin is added as well, so the sample keeps the crawl's real exact duplicates. Rows in every file
are ordered by sha256(id). With the same corpus and pyarrow / zstandard versions the output is
byte-identical. After writing, the files are read back and a summary is printed.
"""
import argparse
import collections
import glob
import hashlib
import json
import os
import re
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard

SCHEMA = pa.schema([('id', pa.string()), ('text', pa.string()), ('source', pa.string()),
                    ('lang_hint', pa.string()), ('origin', pa.string())])
COLS = [f.name for f in SCHEMA]

MAX_CHARS = 60000          # skip documents whose text is longer than this
ROW_GROUP = 1024
ZSTD_LEVEL = 19

# Redistributable origins. Permissive: everything except cmrc2018 and libreoffice-help, which are
# share-alike / file-level copyleft and are shipped under their own licences (see README.md).
ALLOWED = ('dolma-cc', 'spamassassin', 'datajuicer-demos', 'python-docs', 'cpython-3.11-stdlib',
           'go-1.19-src', 'rust-1.63-std', 'cmrc2018', 'libreoffice-help')
# Never loaded, listed so the check below fails loudly if ALLOWED is ever edited carelessly.
FORBIDDEN = ('smp2020-ewect', 'douban-bookreview', 'chinesenlpcorpus', 'c3', 'brown', 'nlp-corpus',
             'gensim-testdata', 'debian-handbook', 'debian-reference', 'debian-maint-guide',
             'debian-edu-doc', 'debian-manpages', 'perl-doc')
assert not set(ALLOWED) & set(FORBIDDEN)


def stratum(d):
    """Sub-collection of a document, derived from its id (and lang_hint for libreoffice-help)."""
    o, rest = d['origin'], d['id'].split('/', 1)[1]
    if o == 'spamassassin':                       # spam-1, spam-2, easy-ham-1, easy-ham-2, hard-ham-1
        return rest.split('/', 1)[0]
    if o == 'dolma-cc':                           # ccmain, provided, multiple_files_cc_en_head-0091.jsonl, ...
        return rest.rsplit('-', 1)[0]
    if o == 'libreoffice-help':
        return d['lang_hint'] or ''
    return ''


# (file, origin, source) -> {stratum: quota}; quota None = every candidate.
PLAN = {
    'web-en.parquet': {
        ('dolma-cc', 'web'): {'ccmain': 420, 'provided': None,
                              'multiple_files_cc_en_head-0091.jsonl': None,
                              'multiple_files_cc_en_head-0174.jsonl': None},
        ('spamassassin', 'web'): {'spam-1': 80, 'spam-2': 80, 'easy-ham-1': 50, 'easy-ham-2': 30,
                                  'hard-ham-1': 30},
        ('datajuicer-demos', 'web'): {'': None},
    },
    'docs-code.parquet': {
        ('python-docs', 'docs'): {'': 80},
        ('cpython-3.11-stdlib', 'code'): {'': 80},
        ('go-1.19-src', 'code'): {'': 80},
        ('rust-1.63-std', 'code'): {'': 60},
    },
    'zh-wiki-docs.jsonl.zst': {
        ('cmrc2018', 'wiki'): {'': 300},
        ('libreoffice-help', 'docs'): {'zh-CN': 100, 'zh-TW': 100},
    },
    'papers.jsonl.zst': {
        ('datajuicer-demos', 'papers'): {'': None},
    },
}
KEEP_DUP_GROUPS = {'dolma-cc'}

HAN = re.compile(r'[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]')   # CJK ideographs (+ Ext. A, compat.)


def key(d):
    return hashlib.sha256(d['id'].encode('utf-8')).hexdigest()


def load(corpus):
    files = sorted(glob.glob(os.path.join(corpus, 'bench', 'part-*.parquet')))
    if not files:
        sys.exit('no bench/part-*.parquet under %s' % corpus)
    allowed = pa.array(sorted(ALLOWED))
    rows = []
    for f in files:
        t = pq.read_table(f, columns=COLS)
        rows.extend(t.filter(pc.is_in(t['origin'], value_set=allowed)).to_pylist())
    ids = collections.Counter(d['id'] for d in rows)
    if len(ids) != len(rows):
        sys.exit('non-unique ids in corpus')
    return rows


def select(rows):
    by = collections.defaultdict(list)
    for d in rows:
        if len(d['text']) <= MAX_CHARS:
            by[(d['origin'], d['source'])].append(d)
    out = {}
    for fname, groups in PLAN.items():
        picked = []
        for (origin, source), quotas in groups.items():
            cand = sorted(by[(origin, source)], key=key)
            strata = collections.defaultdict(list)
            for d in cand:
                strata[stratum(d)].append(d)
            unknown = set(strata) - set(quotas)
            if unknown and origin != 'libreoffice-help':      # other libreoffice languages: not wanted
                sys.exit('unplanned strata for %s: %s' % (origin, sorted(unknown)))
            take = {}
            for s, n in quotas.items():
                if not strata.get(s):
                    sys.exit('empty stratum %s/%r' % (origin, s))
                for d in strata[s][:n]:
                    take[d['id']] = d
            if origin in KEEP_DUP_GROUPS:
                n_text = collections.Counter(d['text'] for d in cand)
                for d in cand:
                    if n_text[d['text']] > 1 and stratum(d) in quotas:
                        take[d['id']] = d
            picked.extend(take.values())
        picked.sort(key=key)
        out[fname] = picked
    return out


def write_parquet(rows, path):
    table = pa.table({c: [r[c] for r in rows] for c in COLS}, schema=SCHEMA)
    tmp = path + '.tmp'
    pq.write_table(table, tmp, compression='zstd', compression_level=ZSTD_LEVEL, row_group_size=ROW_GROUP,
                   use_dictionary=['source', 'lang_hint', 'origin'],
                   write_statistics=['id', 'source', 'lang_hint', 'origin'])
    os.replace(tmp, path)


def write_jsonl_zst(rows, path):
    raw = ''.join(json.dumps({c: r[c] for c in COLS}, ensure_ascii=False) + '\n' for r in rows).encode('utf-8')
    data = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True).compress(raw)
    tmp = path + '.tmp'
    with open(tmp, 'wb') as fh:
        fh.write(data)
    os.replace(tmp, path)


def read_back(path):
    if path.endswith('.parquet'):
        pf = pq.ParquetFile(path)
        assert pf.schema_arrow.names == COLS, pf.schema_arrow.names
        assert all(pf.metadata.row_group(i).num_rows <= ROW_GROUP for i in range(pf.num_row_groups))
        return pf.read().to_pylist()
    with open(path, 'rb') as fh:
        raw = zstandard.ZstdDecompressor().stream_reader(fh).read()
    rows = [json.loads(line) for line in raw.decode('utf-8').splitlines()]
    assert all(list(r) == COLS for r in rows)
    return rows


def report(out_dir):
    every = []
    for fname in PLAN:
        path = os.path.join(out_dir, fname)
        rows = read_back(path)
        every.extend(rows)
        print('%-24s %9d bytes %5d docs  %6.2f MB text' % (
            fname, os.path.getsize(path), len(rows), sum(len(r['text'].encode()) for r in rows) / 1e6))
        for k, n in sorted(collections.Counter((r['origin'], r['source'], r['lang_hint'] or 'null')
                                               for r in rows).items()):
            print('    %-22s %-7s %-6s %5d' % (k + (n,)))
    assert len({r['id'] for r in every}) == len(every), 'duplicate ids across files'
    assert all(r['origin'] in ALLOWED for r in every)
    assert all(isinstance(r['text'], str) and 0 < len(r['text']) <= MAX_CHARS for r in every)
    seen, dups = set(), 0
    for r in sorted(every, key=key):
        dups += r['text'] in seen
        seen.add(r['text'])
    zh30 = collections.Counter(r['origin'] for r in every if len(HAN.findall(r['text'])) >= 30)
    total = sum(os.path.getsize(os.path.join(out_dir, f)) for f in PLAN)
    print('total: %d docs, %d bytes on disk' % (len(every), total))
    print('by origin:', dict(sorted(collections.Counter(r['origin'] for r in every).items())))
    print('by source:', dict(sorted(collections.Counter(r['source'] for r in every).items())))
    print('by lang_hint:', dict(sorted(collections.Counter(r['lang_hint'] or 'null' for r in every).items())))
    print('exact-duplicate texts (copies after the first, across all files): %d' % dups)
    print('docs with >= 30 Chinese characters: %d %s' % (sum(zh30.values()), dict(sorted(zh30.items()))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--corpus', required=True, help='the benchmark corpus directory (holds bench/)')
    ap.add_argument('--out', default=os.path.dirname(os.path.abspath(__file__)))
    a = ap.parse_args()

    picked = select(load(a.corpus))
    os.makedirs(a.out, exist_ok=True)
    for fname, rows in picked.items():
        path = os.path.join(a.out, fname)
        (write_parquet if fname.endswith('.parquet') else write_jsonl_zst)(rows, path)
    report(a.out)


if __name__ == '__main__':
    main()
