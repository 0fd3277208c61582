#!/usr/bin/env bash
# Packs the price corpus (../shared/data/corpus, beside the project's root)
# into .corpus/corpus.tar.xz, which a device visit carries (carry
# [".corpus"]) and visit.sh part walkforward unpacks: the corpus is 66 MB
# as files, over the 64 MiB a call may carry with the tree, and about
# 20 MB packed. .corpus/ is ignored (.git/info/exclude), never committed.
#   bash tools/device/pack-corpus.sh [CORPUS_DIR]
set -eu
src=${1:-../shared/data/corpus}
[ -f "$src/MANIFEST.tsv" ] || { echo "pack-corpus: $src has no MANIFEST.tsv: not the corpus" >&2; exit 2; }
mkdir -p .corpus
grep -qx '/.corpus/' .git/info/exclude 2>/dev/null || echo '/.corpus/' >>.git/info/exclude
tar cf - -C "$src" MANIFEST.tsv README.md hourly h4-forex lean | xz -9 -T2 >.corpus/corpus.tar.xz.tmp
mv .corpus/corpus.tar.xz.tmp .corpus/corpus.tar.xz
ls -l .corpus/corpus.tar.xz
