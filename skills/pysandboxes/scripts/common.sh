# Shared by the scripts of the pysandboxes skill: the binaries.
PYSANDBOXES=${PYSANDBOXES:-pysandboxes}
PYTHON_SB=${PYTHON_SB:-python-sb}
PYTHON=${PYTHON:-python3}

need() {
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "$(basename "$0"): '$1' not found: put it on PATH or set $2" >&2
		exit 1
	fi
}
