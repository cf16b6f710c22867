#!/usr/bin/env bash
# SPEC §1: core crates (pty, mux, ding, hooks, cli), tests included, never name a provider or
# its screen glyphs. Provider knowledge belongs in adapters/. Exits 1 listing every hit.
set -uo pipefail
cd "$(dirname "$0")/.."
core=(pty mux ding hooks cli tests/fixtures/ding)
pattern='claude|codex|opencode|gemini|anthropic|openai|\bpi\b|❯|›|⏵'
hits=$(grep -rInEi --exclude-dir=target "$pattern" "${core[@]}" 2>/dev/null)
if [ -n "$hits" ]; then
  echo "provider names or glyphs in core crates (move them to adapters/):"
  echo "$hits"
  exit 1
fi
echo "provider-neutral check: core crates ${core[*]} are clean"
