#!/bin/sh
# Seed the corpora of the file-level targets with the small fixture files (under 40 KB: the
# fuzzer mutates small inputs far faster) and the hand-made nasties under 40 KB.
set -e
cd "$(dirname "$0")"
for t in superblock_and_header walk read_datasets; do
    mkdir -p "corpus/$t"
    find ../mount-tests/fixtures/data ../mount-tests/fixtures/nasty \
        ../src/format/testdata ../src/layout/chunk_index/testdata \
        -name '*.h5' -size -40k -exec cp {} "corpus/$t/" \;
done
mkdir -p corpus/filters corpus/chunk_index
