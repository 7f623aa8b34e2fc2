#!/bin/sh
# learn.sh LEARNED KIND [ARGS...]: run tests in learning mode, the rules written
# to LEARNED (never to the profile). KIND: pytest, go-test or python.
set -u
. "$(dirname "$0")/common.sh"
if [ $# -lt 2 ]; then
	echo "usage: learn.sh LEARNED pytest|go-test|python [ARGS...]" >&2
	exit 2
fi
learned=$1 kind=$2
shift 2
case $learned in
*.py-sandboxes)
	echo "learn.sh: '$learned' looks like a profile: learn into a file of its own (e.g. /tmp/learned.rules)" >&2
	exit 2 ;;
esac
case $kind in
pytest)
	need "$PYTHON_SB" PYTHON_SB
	exec "$PYTHON_SB" --learn="$learned" -m pytest "$@" ;;
python)
	need "$PYTHON_SB" PYTHON_SB
	exec "$PYTHON_SB" --learn="$learned" "$@" ;;
go-test)
	case $learned in /*) ;; *) learned=$(pwd)/$learned ;; esac
	PYSANDBOXES_LEARN=$learned exec go test -count=1 "$@" ;;
*)
	echo "learn.sh: unknown kind '$kind' (pytest, go-test or python)" >&2
	exit 2 ;;
esac
