#!/usr/bin/env bash
# belfry benchmarks, side by side with tmux and a raw PTY reader, in one run on one machine
# (spec §13). Run on demand; not part of the test suite. Prints a results table.
#
# Knobs (environment):
#   BENCH_MB=100            size of each throughput file in MB (BENCH_MB=10 for a quick run)
#   BENCH_REPS=5            throughput repetitions (the median is reported)
#   BENCH_PAIR_REPS=11      repetitions of the relay and `belfry attach`, run back to back
#   BENCH_VARIANTS=relay,belfry+attach   throughput rows to run (default all; raw always
#                           runs, every ratio is to it): raw relay relay+model
#                           relay+model-thread tmux tmux+client dtach dtach+client screen
#                           screen+client belfry belfry+attach belfry+attach-frames belfry+frames
#   BENCH_SENDS=5000        guarded sends per path (daemon socket, pane host socket)
#   BENCH_CLI_RUNS=300      invocations per CLI command
#   BENCH_KEYS=1000         keys per attach client in the echo test
#   BENCH_ECHO_BLOCKS=4     the echo test alternates belfry and tmux in this many blocks
#   BENCH_PANES=100         idle panes in the memory test
#   BENCH_MORE_PANES=100    belfry panes added after it, every pane host measured again
#   BENCH_DISPATCH_RUNS=1000
#   BENCH_BUSY_RUNS=200     CLI invocations per command and round while a pane prints continuously
#   BENCH_BUSY_ROUNDS=5     rounds of the busy section (each tool's busy session in turn)
#   BENCH_DING_N=1000       DING messages per path (CLI post, direct post + nudge, rich). Each
#                           waits for the notice's 500 ms pause before Enter; the three panes
#                           take turns in 200 ms slots, so 1000 take ~10 min (+1 min poll-only)
#   BENCH_DING_POLL_N=100   DING messages posted without a nudge (found through inotify)
#   BENCH_DING_SLOT_MS=200  0 = one DING message at a time (~3x slower; a check that the
#                           slots do not change the numbers)
#   BENCH_REMOTE_SENDS=1000 guarded sends per path (local socket, ssh) in the remote section
#   BENCH_REMOTE_CLI_RUNS=30 whole `belfry send` commands per path in the remote section
#   BENCH_IDLE_PANES=200    idle panes in the idle test (half rich, half aggressive)
#   BENCH_IDLE_HELD=1000    held messages in each rich pane's inbox in the idle test
#   BENCH_IDLE_SECS=60      how long the idle test measures
#   BENCH_ONLY=throughput,send,cli,busy,echo,memory,dispatch,ding,idle,remote   sections to run
#                           (remote starts a real sshd on 127.0.0.1: Debian's openssh-server)
#   BENCH_OUT=DIR           also write results.json and results.md there
#   BELFRY_BIN, BENCH_BIN   use these binaries instead of building them
#   BENCH_COMMIT=TEXT       the belfry version to print (default: git HEAD of this checkout)
#   CARGO_TARGET_DIR        where cargo builds (default: <repo>/target)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$root/target}

for tool in tmux python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 2; }
done

# dtach and GNU screen are measured beside tmux, and the remote section runs a real sshd. When
# missing they are installed from the distribution's packages (Debian: `dtach`, `screen`,
# `openssh-server`, the last only when the remote section runs), and the bench says so; the
# package lists are refreshed once when the first install fails.
missing=()
for tool in dtach screen; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [[ -z "${BENCH_ONLY:-}" || ",${BENCH_ONLY}," == *,remote,* ]] && [[ ! -x /usr/sbin/sshd ]]; then
  missing+=(openssh-server)
fi
if (( ${#missing[@]} )); then
  echo "bench: ${missing[*]} not installed; installing with apt-get (Debian packages ${missing[*]})" >&2
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2 &&
    ! { "${sudo[@]}" apt-get update -qq >&2 &&
      "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2; }; then
    echo "bench: apt-get install ${missing[*]} failed; install them by hand" >&2
    exit 2
  fi
fi

if [[ -z "${BELFRY_BIN:-}" || -z "${BENCH_BIN:-}" ]]; then
  # Built as scripts/install --static builds it: the C library linked in when this machine can.
  # shellcheck source=scripts/static-libc
  source "$root/scripts/static-libc"
  echo "bench: building belfry and belfry-bench (release${BELFRY_CARGO_TARGET:+, $BELFRY_CARGO_TARGET with the C library linked in})" >&2
  (cd "$root" && RUSTFLAGS="${BELFRY_STATIC_RUSTFLAGS:-${RUSTFLAGS:-}}" cargo build --release \
    ${BELFRY_CARGO_TARGET:+--target "$BELFRY_CARGO_TARGET"} -p belfry-cli -p belfry-bench >&2)
  built="$target/${BELFRY_CARGO_TARGET:+$BELFRY_CARGO_TARGET/}release"
  if [[ -n "$BELFRY_CARGO_TARGET" ]]; then
    # The installed pair: `belfry` fixed-address, the build above beside it as `belfry-host`
    # (which the daemon and pane hosts run), in a directory of their own.
    fixed=$(cd "$root" && belfry_build_fixed "$target/fixed")
    mkdir -p "$target/bench-pair"
    belfry_place_pair "$target/bench-pair" "$built/belfry" "$fixed"
    BELFRY_BIN=${BELFRY_BIN:-$target/bench-pair/belfry}
  fi
fi
belfry=${BELFRY_BIN:-$built/belfry}
benchbin=${BENCH_BIN:-$built/belfry-bench}
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git -C "$root" status --porcelain -- pty mux ding hooks cli 2>/dev/null)" ]]; then
  commit="$commit (working tree has changes)"
fi
commit=${BENCH_COMMIT:-$commit}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/belfry-bench.XXXXXX")
tmux_socket="bench-$$"

# An installation of its own: runtime dir, state, logs, and a tmux server on its own socket
# under the temp dir. Nothing of the user's belfry or tmux is touched.
export BELFRY_RUNTIME_DIR="$tmp/rt" BELFRY_STATE="$tmp/state" XDG_STATE_HOME="$tmp/xdg"
export TMUX_TMPDIR="$tmp"
unset BELFRY_SOCKET BELFRY_HOOKS_FILE BELFRY_HOOK_CONTEXT TMUX

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  timeout 60 "$belfry" shutdown --kill-panes >/dev/null 2>&1 || true
  if compgen -G "$tmp/rt/panes/*.json" >/dev/null; then
    for rec in "$tmp"/rt/panes/*.json; do
      pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$rec" \
        2>/dev/null || true)
      [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
    done
  fi
  if [[ -f "$tmp/daemon.pid" ]]; then
    kill -9 "$(cat "$tmp/daemon.pid")" 2>/dev/null || true
  fi
  tmux -L "$tmux_socket" kill-server >/dev/null 2>&1 || true
  # dtach masters and GNU screen servers bench.py left (it ends them itself unless it was
  # killed): the pids their programs wrote, and the pids screen's socket names start with.
  # Only a process whose command line names this run's temp dir is killed.
  for rec in "$tmp"/*.pid "$tmp"/screen/*.*; do
    [[ -e "$rec" ]] || continue
    if [[ "$rec" == *.pid ]]; then pid=$(cat "$rec" 2>/dev/null || true); else
      pid=${rec##*/}; pid=${pid%%.*}; fi
    [[ "$pid" =~ ^[0-9]+$ ]] || continue
    if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$tmp"; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

# bench.py runs in the background so a signal reaches this script at once; it is forwarded
# as SIGTERM, bench.py cleans up what it started, and the EXIT trap above sweeps the rest.
python3 "$here/bench.py" \
  --belfry "$belfry" --bench "$benchbin" --tmp "$tmp" --tmux-socket "$tmux_socket" \
  --commit "$commit" \
  --mb "${BENCH_MB:-100}" --reps "${BENCH_REPS:-5}" --pair-reps "${BENCH_PAIR_REPS:-11}" --variants "${BENCH_VARIANTS:-}" \
  --sends "${BENCH_SENDS:-5000}" \
  --cli-runs "${BENCH_CLI_RUNS:-300}" --keys "${BENCH_KEYS:-1000}" \
  --echo-blocks "${BENCH_ECHO_BLOCKS:-4}" \
  --panes "${BENCH_PANES:-100}" --more-panes "${BENCH_MORE_PANES:-100}" \
  --dispatch-runs "${BENCH_DISPATCH_RUNS:-1000}" \
  --busy-runs "${BENCH_BUSY_RUNS:-200}" --busy-rounds "${BENCH_BUSY_ROUNDS:-5}" \
  --ding-n "${BENCH_DING_N:-1000}" --ding-poll-n "${BENCH_DING_POLL_N:-100}" \
  --ding-slot-ms "${BENCH_DING_SLOT_MS:-200}" \
  --remote-sends "${BENCH_REMOTE_SENDS:-1000}" \
  --remote-cli-runs "${BENCH_REMOTE_CLI_RUNS:-30}" \
  --idle-panes "${BENCH_IDLE_PANES:-200}" --idle-held "${BENCH_IDLE_HELD:-1000}" \
  --idle-secs "${BENCH_IDLE_SECS:-60}" \
  --only "${BENCH_ONLY:-throughput,send,cli,busy,echo,memory,dispatch,ding,idle,remote}" \
  --out "${BENCH_OUT:-}" &
py=$!
interrupted=""
trap 'interrupted=1; kill -TERM "$py" 2>/dev/null || true' INT TERM
set +e
wait "$py"
rc=$?
if [[ -n "$interrupted" ]]; then
  for _ in $(seq 1 600); do
    kill -0 "$py" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$py" 2>/dev/null
  rc=130
fi
exit "$rc"
