#!/usr/bin/env bash
# spec §1: core crates never name a provider or hold its knowledge; provider knowledge belongs in
# adapters/ as data. Two checks, each exiting 1 with every hit listed:
#
# 1. Provider names and screen glyphs anywhere in the core crates (pty, transport, mux, ding, hooks, cli,
#    proto), tests included.
# 2. A harness's event or field literals as string literals in the core's non-test code, such as
#    `source == "compact"`: knowledge of one harness that names no provider, which check 1 cannot
#    see. The words are every native event name and compaction source in
#    adapters/*/declaration.json, plus the harness events, sources and output fields from the
#    field notes that no declaration lists (below). belfry's own canonical names are excluded:
#    the semantic events (`session-start`, …), the common hook shape (`hook_event_name`,
#    `tool_name`, `source`, …) and the few words that are belfry's too (`event`, `input`, and
#    `clear`, an op and a hold reason). Test code (`tests/` folders and each file's trailing
#    `#[cfg(test)] mod`) may quote harness input, and is not scanned.
set -uo pipefail
cd "$(dirname "$0")/.."
crates=()
for crate in pty transport mux ding hooks cli proto; do
  [ -d "$crate" ] && crates+=("$crate")
done
core=("${crates[@]}" tests/fixtures/ding)
status=0

pattern='claude|codex|opencode|gemini|qwen|anthropic|openai|\bpi\b|❯|›|⏵'
hits=$(grep -rInEi --exclude-dir=target "$pattern" "${core[@]}" 2>/dev/null)
if [ -n "$hits" ]; then
  echo "provider names or glyphs in core crates (move them to adapters/):"
  echo "$hits"
  status=1
fi

hits=$(python3 - "${crates[@]}" <<'PY'
import glob
import json
import re
import sys

# Harness words the field notes record that no adapter declaration lists (yet): hook events,
# their `source`/`trigger` values and their output fields.
FIELD_NOTES = """
PostToolUseFailure PostCompact PermissionRequest Interrupt BeforeModel AfterModel
BeforeToolSelection session.created session.idle session.compacted session.error
before_agent_start turn_start turn_end startup resume compact fork manual
hookSpecificOutput permissionDecision permissionDecisionReason additionalContext updatedInput
stopReason suppressOutput systemMessage stop_hook_active last_assistant_message tool_use_id
notification_type
""".split()
# Words a harness uses that are belfry's own too.
CANONICAL = {"event", "input", "clear"}

words = {}
for path in sorted(glob.glob("adapters/*/declaration.json")):
    with open(path) as file:
        declaration = json.load(file)
    for native in declaration.get("events", {}).values():
        words.setdefault(native, path)
    for event in declaration.get("compaction_events", []):
        words.setdefault(event.get("source", ""), path)
for word in FIELD_NOTES:
    words.setdefault(word, "the harness field notes")
for word in CANONICAL:
    words.pop(word, None)
words.pop("", None)

literal = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
for crate in sys.argv[1:]:
    for path in sorted(glob.glob(f"{crate}/src/**/*.rs", recursive=True)):
        with open(path) as file:
            lines = file.readlines()
        for number, line in enumerate(lines, 1):
            code = line.strip()
            if code == "#[cfg(test)]" and lines[number:] and lines[number].lstrip().startswith("mod "):
                break
            if code.startswith("//"):
                continue
            for match in literal.finditer(line):
                if match.group(1) in words:
                    print(f'{path}:{number}: "{match.group(1)}" (from {words[match.group(1)]}): {code}')
PY
)
if [ -n "$hits" ]; then
  echo "harness event or field literals in core code (put them in adapters/<name>/declaration.json):"
  echo "$hits"
  status=1
fi

if [ "$status" = 0 ]; then
  echo "provider-neutral check: core crates ${core[*]} are clean (names, glyphs and harness literals)"
fi
exit "$status"
