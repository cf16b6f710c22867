#!/usr/bin/env bash
# The A/B evaluation of DING's delivery policies on real harnesses (docs/evaluation.md): the
# same seeded workload against each harness twice, the aggressive policy and the rich one
# (tests/tests/ab_eval.rs), inside a loopback-only network namespace against the scripted
# model server. Results (a markdown table with every collision's screens, a JSON summary, the
# model server's request log and the dispatch call log of each arm) go to AB_OUT.
#
# Usage: bench/ab.sh [HARNESS...]   HARNESS: a pin of tests/harnesses.json with an A/B test:
#   claude codex opencode opencode2 pi pi1 gemini qwen (default: claude codex)
#   AB_SEED=20261201  AB_MESSAGES=100  AB_TASKS=30  AB_ARMS=aggressive,rich  AB_DRAFTS=mixed|submit
#   AB_OUT=bench/ab-results  AB_VERSION=2.1.337 (a harness version installed beside the pin)
#
# Needs the harnesses scripts/install-harnesses puts in target/harnesses and the privilege to
# make a network namespace (root, or run under scripts/netns-run). Everything runs under
# nice -n 19; one arm of 100 messages takes about ten minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export AB_SEED=${AB_SEED:-20261201} AB_MESSAGES=${AB_MESSAGES:-100} AB_TASKS=${AB_TASKS:-30}
export AB_ARMS=${AB_ARMS:-aggressive,rich}
export AB_OUT=${AB_OUT:-$root/bench/ab-results}
mkdir -p "$AB_OUT"
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(claude codex)
cd "$root"
nice -n 19 cargo build --workspace --bins
for harness in "${harnesses[@]}"; do
  case "$harness" in
    claude|codex|opencode|opencode2|pi|pi1|gemini|qwen) ;;
    *) echo "bench/ab.sh: unknown harness $harness (claude, codex, opencode, opencode2, pi, pi1, gemini or qwen)" >&2; exit 2 ;;
  esac
  echo "bench/ab.sh: $harness, seed $AB_SEED, $AB_MESSAGES messages and $AB_TASKS tasks per arm, arms $AB_ARMS -> $AB_OUT"
  nice -n 19 cargo test -p belfry-tests --test ab_eval -- --ignored --nocapture --exact "ab_$harness" \
    2>&1 | tee "$AB_OUT/ab-$harness.log"
done
