#!/bin/sh
# merge.sh LEARNED DIGEST [PROFILE]: merge the learned file reviewed by
# review.sh (the review with DIGEST), after the human approved it. Never merges
# a high-risk grant: it then merges nothing and prints what the human may run.
# Exit status: 0 merged (or nothing to merge), 3 not merged, 1 an error.
set -u
. "$(dirname "$0")/common.sh"
need "$PYSANDBOXES" PYSANDBOXES
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: merge.sh LEARNED DIGEST [PROFILE]" >&2
	exit 2
fi
case $2 in
"" | -*)
	echo "merge.sh: DIGEST is the REVIEW-DIGEST line of review.sh" >&2
	exit 2 ;;
esac
for a in "$@"; do
	case $a in
	--allow-high*)
		echo "merge.sh: a high-risk grant is approved by the human, who runs the command review.sh printed" >&2
		exit 2 ;;
	esac
done
learned=$1 digest=$2
if [ $# -eq 3 ]; then
	set -- --learned "$learned" --config "$3"
else
	set -- --learned "$learned"
fi
# --approve shows the diff again, then merges; without --allow-high a
# high-risk grant makes it merge nothing (exit 3).
"$PYSANDBOXES" diff "$@" --approve --digest="$digest" </dev/null
code=$?
if [ "$code" -eq 3 ]; then
	echo "merge.sh: nothing merged. If the review holds HIGH grants, only the human may approve them (the HIGH-RISK command of review.sh); if the files changed, review again." >&2
fi
exit "$code"
