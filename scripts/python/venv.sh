#!/usr/bin/env bash
# scripts/python/venv.sh: a cached Python virtual environment with the
# foreign producers of the integration tests (requirements.txt beside this
# file), in .cache/pyenv-<hash>. Installs only when it is missing or the
# requirements changed; prints the interpreter's path.
#
#   PY="$(scripts/python/venv.sh)" && "$PY" scripts/python/produce.py ...
#
# Environment: ANTIDOTE_CACHE (default .cache/ in the repository).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${ANTIDOTE_CACHE:-$ROOT/.cache}"
REQ="$ROOT/scripts/python/requirements.txt"
die() { echo "venv.sh: $*" >&2; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 not found (Debian: apt-get install python3 python3-venv)"
key="$(sha256sum "$REQ" | cut -c1-12)"
ENV="$CACHE/pyenv-$key"
if [ "$(cat "$ENV/.complete" 2>/dev/null)" != "$key" ]; then
  echo "venv.sh: installing $(grep -v '^#' "$REQ" | tr '\n' ' ')into $ENV" >&2
  rm -rf "$ENV"; mkdir -p "$CACHE"
  python3 -m venv "$ENV" >&2 ||
    die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$ENV/bin/pip" install -q --disable-pip-version-check -r "$REQ" >"$CACHE/pip.log" 2>&1 ||
    { tail -n 20 "$CACHE/pip.log" >&2; die "pip install failed (is PyPI reachable? log: $CACHE/pip.log)"; }
  echo "$key" >"$ENV/.complete"
fi
echo "$ENV/bin/python"
