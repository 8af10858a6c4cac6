#!/usr/bin/env bash
# Checks the CI examples: each against its format's schema (check-jsonschema ships GitHub's
# workflow and GitLab CI's schemas, so no network is needed), and, given the volley binary,
# that every flag their volley command lines use is one volley knows. .ci/run runs it.
#
#   examples/ci/check.sh [path/to/volley]
set -euo pipefail
volley=${1:-}
# The binary's path is the caller's, so it is made absolute before moving to this folder.
[ -z "$volley" ] || volley=$(realpath "$volley")
cd "$(dirname "$0")"

check-jsonschema --builtin-schema vendor.github-workflows github-actions.yml
check-jsonschema --builtin-schema vendor.gitlab-ci gitlab-ci.yml

[ -n "$volley" ] || exit 0
help=$("$volley" --help; "$volley" serve --help; "$volley" compare --help)
status=0
for file in github-actions.yml gitlab-ci.yml; do
    # Continuation lines joined, then the flags of every line that runs volley.
    flags=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$file" | grep 'release/volley' |
        grep -oE '(^|[[:space:]])--[a-z][a-z0-9-]*' | tr -d '[:space:]' | sed 's/--/\n--/g' | sort -u)
    [ -n "$flags" ] || { echo "$file: no volley command line found" >&2; status=1; }
    for flag in $flags; do
        if ! grep -qE -- "(^|[ ,])$flag([ =,]|$)" <<<"$help"; then
            echo "$file: volley has no flag $flag" >&2
            status=1
        fi
    done
done
[ "$status" -eq 0 ] && echo "ok -- every volley flag in the examples exists"
exit "$status"
