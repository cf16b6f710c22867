#!/bin/sh
# The guard of the example belfry-hooks.kdl: refuses a force push before the shell tool runs
# it. Its stdin is the hook JSON (docs/hooks.md, "Handlers"): exit 2 with the reason on stderr
# refuses the call, exit 0 with nothing on stdout lets it run. It reads the JSON as text, so it
# needs nothing beyond sh; a guard of your own may parse it properly.
input=$(cat)
case $input in
*"git push"*"--force"* | *"git push"*" -f"*)
    echo "force pushes are refused here: push without --force (or ask a person)" >&2
    exit 2
    ;;
esac
exit 0
