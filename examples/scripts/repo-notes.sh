#!/bin/sh
# The enricher of the example belfry-hooks.kdl: prints docs/agent-notes.md of the harness's
# working directory (the project) when there is one; stdout becomes context the model sees.
# Without the file it prints nothing, which adds nothing.
cat >/dev/null
if [ -f docs/agent-notes.md ]; then
    cat docs/agent-notes.md
fi
exit 0
