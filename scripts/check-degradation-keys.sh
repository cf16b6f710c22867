#!/usr/bin/env bash
# spec §9: each lossy or unsupported cell of the capability matrix (adapters/*/matrix.json) has a
# stable degradation key, and a key may leave the matrix only when a test proves the loss is
# gone. The committed list adapters/degradation-keys.txt is the record: this script exits 1
#   - for a key in the list that no matrix has any more, unless a Rust test function named
#     test_closes_<key with - and : as _> exists somewhere in the tree (then delete the line);
#   - for a key in a matrix that the list lacks (add it, so that dropping it later is checked).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import glob
import json
import re
import subprocess
import sys

current = set()
for path in sorted(glob.glob("adapters/*/matrix.json")):
    with open(path) as file:
        matrix = json.load(file)
    for feature, cell in matrix.get("cells", {}).items():
        status = cell.get("status")
        if status in ("lossy", "unsupported"):
            key = cell.get("key")
            if not key:
                print(f"{path}: cell {feature!r} is {status} without a degradation key")
                sys.exit(1)
            current.add(key)
    not_admitted = matrix.get("not_admitted")
    if not_admitted:
        current.add(not_admitted["key"])

listed = set()
with open("adapters/degradation-keys.txt") as file:
    for line in file:
        line = line.strip()
        if line and not line.startswith("#"):
            listed.add(line)

status = 0
for key in sorted(current - listed):
    print(f"degradation key {key} is in a matrix but not in adapters/degradation-keys.txt: add it")
    status = 1
for key in sorted(listed - current):
    test = "test_closes_" + re.sub(r"[-:]", "_", key)
    found = subprocess.run(
        ["grep", "-rqE", "--include=*.rs", "--exclude-dir=target", rf"fn {test}\b", "."],
        check=False,
    ).returncode == 0
    if found:
        print(f"degradation key {key} closed by {test}: remove it from adapters/degradation-keys.txt")
    else:
        print(f"degradation key {key} was dropped from the matrix without a test named {test}")
    status = 1
if status == 0:
    print(f"degradation keys: {len(current)} keys, all listed; none dropped")
sys.exit(status)
PY
