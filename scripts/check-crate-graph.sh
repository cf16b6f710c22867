#!/usr/bin/env bash
# The crate graph in docs/architecture.md is the one the Cargo.toml files declare.
#
# The edges are read from `cargo metadata` (every dependency, of any kind, of a workspace crate
# on another workspace crate), each crate named by its folder (`mux`, `proto`, …), and compared
# with the fenced ```crate-graph block of docs/architecture.md, one `crate -> dependency` line
# per edge. Any crate the workspace has is checked, so a new crate needs its edges listed. Exits 1
# naming every edge that is missing from the document or that the document lists but no
# Cargo.toml declares, and every crate but the pane host's own users (PANE_USERS) that depends
# on the pane host, the terminal model or the PTY: the daemon, the hooks and the activity
# adapter reach sockets through `transport` alone.
set -euo pipefail
cd "$(dirname "$0")/.."
script=$(cat <<'PY'
import json
import os
import re
import sys

metadata = json.load(sys.stdin)
root = metadata["workspace_root"]
members = set(metadata["workspace_members"])
folder = {}
for package in metadata["packages"]:
    if package["id"] in members:
        folder[package["name"]] = os.path.relpath(os.path.dirname(package["manifest_path"]), root)

declared = set()
# Who may depend on the pane host (`pty`) or on what only it should hold: the pane host
# itself, the CLI (the attach client and `belfry pane-host`), the benchmarks, and the
# end-to-end tests (the screen model as the terminal at the far end of a slow link).
PANE_USERS = {"pty", "cli", "bench", "tests"}
PANE_ONLY = {"belfry-pty", "alacritty_terminal", "pty-process"}
pane_bad = []
for package in metadata["packages"]:
    if package["id"] not in members:
        continue
    for dependency in package["dependencies"]:
        if dependency["name"] in folder:
            declared.add((folder[package["name"]], folder[dependency["name"]]))
        if dependency["name"] in PANE_ONLY and folder[package["name"]] not in PANE_USERS:
            pane_bad.append((folder[package["name"]], dependency["name"]))

doc = sys.argv[1]
text = open(doc).read()
blocks = re.findall(r"^```crate-graph\n(.*?)^```", text, re.S | re.M)
if len(blocks) != 1:
    print(f"{doc}: expected one ```crate-graph block, found {len(blocks)}")
    sys.exit(1)
documented = set()
bad = False
for number, line in enumerate(blocks[0].splitlines(), 1):
    line = line.strip()
    if not line:
        continue
    match = re.fullmatch(r"([\w./-]+)\s*->\s*([\w./-]+)", line)
    if not match:
        print(f"{doc}: crate-graph line {number} is not `crate -> dependency`: {line!r}")
        bad = True
        continue
    documented.add((match.group(1), match.group(2)))

for edge in sorted(declared - documented):
    print(f"missing from {doc}: {edge[0]} -> {edge[1]} (declared in {edge[0]}/Cargo.toml)")
    bad = True
for edge in sorted(documented - declared):
    print(f"extra in {doc}: {edge[0]} -> {edge[1]} (no Cargo.toml declares it)")
    bad = True
for crate, dependency in sorted(pane_bad):
    print(f"{crate} depends on {dependency}: only {sorted(PANE_USERS)} may depend on the pane "
          "host, the terminal model or the PTY (use belfry-transport to reach a socket)")
    bad = True
if bad:
    sys.exit(1)
print(f"crate graph: {len(declared)} edges between {len(folder)} crates match {doc}")
PY
)
cargo metadata --format-version 1 --no-deps --offline | python3 -c "$script" docs/architecture.md
