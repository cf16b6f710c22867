#!/bin/sh
# The observer of the example belfry-hooks.kdl: appends one line per tool call (the time and
# the hook JSON) to $BELFRY_AUDIT_LOG, else to belfry-audit.log in the user's state directory.
# The harness does not wait for it (async), and its answer is ignored.
log=${BELFRY_AUDIT_LOG:-${XDG_STATE_HOME:-$HOME/.local/state}/belfry-audit.log}
mkdir -p "$(dirname "$log")" || exit 0
printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(tr '\n' ' ')" >>"$log"
exit 0
