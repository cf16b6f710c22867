#!/usr/bin/env bash
# Runs one examples/<HARNESS>/belfry.kdl offline: inside a loopback-only network namespace
# (scripts/netns-run), against the scripted model server (belfry-model-server) on 127.0.0.1.
#
# Usage: examples/offline.sh HARNESS [PORT]     HARNESS: claude codex gemini opencode pi
#
# It makes a fresh home for the harness from adapters/HARNESS/live.json (the variables and
# seeded files the live tests use: the local model provider, no update checks, the example's
# folder trusted), starts the model server on PORT (default 18181) with examples/script.json,
# projects examples/HARNESS/belfry-hooks.kdl (`belfry hooks apply --trust`), runs `belfry up`
# and then `belfry doctor` on the file, with a daemon of its own (BELFRY_RUNTIME_DIR and
# BELFRY_STATE under that home, printed at the end). The harness is taken from PATH, else from
# target/harnesses (scripts/install-harnesses); belfry, belfry-adapter and belfry-model-server
# from PATH, else target/debug. The panes and the server outlive the script; `belfry down
# examples/HARNESS/belfry.kdl` stops the agent and `kill $(cat HOME/model-server.pid)` the
# server (the script prints HOME).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
harness=${1:?usage: examples/offline.sh HARNESS [PORT]}
port=${2:-18181}
work="$root/examples/$harness"
[ -f "$work/belfry.kdl" ] || { echo "offline.sh: no $work/belfry.kdl" >&2; exit 2; }
if [ "${BELFRY_NETNS:-}" != loopback ]; then
  exec "$root/scripts/netns-run" "$0" "$@"
fi
PATH="$PATH:$root/target/debug"
for dir in "$root"/target/harnesses/*/node_modules/.bin; do
  [ -d "$dir" ] && PATH="$PATH:$dir"
done
export PATH
home=$(mktemp -d "${TMPDIR:-/tmp}/belfry-$harness-home.XXXXXX")
# A daemon of its own, started inside the namespace: a pane runs in its daemon's network
# namespace, so the one of your session (outside) must not launch it. Unix sockets are files,
# so `belfry attach` from outside reaches it with these two variables set.
export BELFRY_RUNTIME_DIR="$home/run" BELFRY_STATE="$home/state"
base_url="http://127.0.0.1:$port"
# The live profile's environment and files, placeholders filled: printed as NAME=VALUE lines.
env_lines=$(python3 - "$root/adapters/$harness/live.json" "$home" "$work" "$base_url" <<'PY'
import json, os, sys
live, home, work, base_url = sys.argv[1:5]
profile = json.load(open(live))
def fill(text):
    return text.replace("{home}", home).replace("{work}", work).replace("{base_url}", base_url)
def fill_json(value):
    if isinstance(value, str):
        return fill(value)
    if isinstance(value, list):
        return [fill_json(v) for v in value]
    if isinstance(value, dict):
        return {fill(k): fill_json(v) for k, v in value.items()}
    return value
for entry in profile.get("files", []):
    path = fill(entry["path"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        if "text" in entry:
            out.write(fill(entry["text"]))
        else:
            json.dump(fill_json(entry["json"]), out, indent=2)
for name, value in profile.get("env", {}).items():
    print(f"{name}={fill(value)}")
PY
)
while IFS= read -r line; do
  [ -n "$line" ] && export "${line?}"
done <<< "$env_lines"
setsid belfry-model-server --script "$root/examples/script.json" --log "$home/requests.ndjson" \
  --port "$port" > "$home/model-server.out" 2>&1 < /dev/null &
echo $! > "$home/model-server.pid"
for _ in $(seq 50); do
  grep -q "$port" "$home/model-server.out" 2>/dev/null && break
  sleep 0.1
done
belfry hooks --dir "$work" apply --trust
belfry up "$work/belfry.kdl"
echo "offline.sh: HOME=$home, model server on $base_url (pid $(cat "$home/model-server.pid"))"
echo "offline.sh: reach it with: export BELFRY_RUNTIME_DIR=$BELFRY_RUNTIME_DIR BELFRY_STATE=$BELFRY_STATE"
belfry doctor --file "$work/belfry.kdl" "$harness" || true
