#!/bin/sh
# review.sh LEARNED [PROFILE]: what merging LEARNED into PROFILE would grant,
# graded, then the REVIEW-DIGEST, HIGHEST and HIGH-RISK lines. Writes nothing.
# Exit status: that of pysandboxes diff (0 nothing, 10 low, 11 medium, 12 high,
# 1 an error).
set -u
. "$(dirname "$0")/common.sh"
need "$PYSANDBOXES" PYSANDBOXES
need "$PYTHON" PYTHON
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: review.sh LEARNED [PROFILE]" >&2
	exit 2
fi
learned=$1
profile=${2:-}
if [ -n "$profile" ]; then
	set -- --learned "$learned" --config "$profile"
else
	set -- --learned "$learned"
fi
# The text for people, then the same review as JSON for the summary: the
# digest ties the approval to this very review.
"$PYSANDBOXES" diff "$@" </dev/null
code=$?
if [ "$code" -eq 1 ] || [ "$code" -eq 2 ]; then
	exit "$code"
fi
json=$("$PYSANDBOXES" diff --json "$@" </dev/null)
printf '%s' "$json" | "$PYTHON" -c '
import json, shlex, sys
learned, profile, pysb = sys.argv[1], sys.argv[2], sys.argv[3]
r = json.load(sys.stdin)
print()
print("REVIEW-DIGEST:", r.get("digest", ""))
print("HIGHEST:", r["highest"])
high = [g["grant"] for g in r["grants"] if g["risk"] == "high"]
if not high:
    print("HIGH-RISK: none")
else:
    cmd = [pysb, "diff", "--learned", learned]
    if profile:
        cmd += ["--config", profile]
    cmd += ["--approve", "--digest=" + r.get("digest", "")]
    cmd += ["--allow-high=" + g for g in high]
    print("HIGH-RISK:", len(high), "grant(s) only the human may approve, by running:")
    print("  " + " ".join(shlex.quote(c) for c in cmd))
' "$learned" "$profile" "$PYSANDBOXES" || exit 1
exit "$code"
