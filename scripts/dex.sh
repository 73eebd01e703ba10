#!/usr/bin/env bash
# scripts/dex.sh: a real OpenID Connect provider (Dex) on loopback for the
# console's login tests: two users with a password and groups, and one
# client, the console's.
#
#   scripts/dex.sh start    build (cached), start, wait until it answers; print the issuer
#   scripts/dex.sh stop     stop it
#   scripts/dex.sh status   print the issuer and exit 0 if it runs
#   scripts/dex.sh env      print the exports the browser test reads (ANTIDOTE_OIDC_*)
#
# Dex is built from the Go module proxy (github.com/dexidp/dex at DEX_VERSION)
# into .cache/bin once, and again only when the version changes. It is built
# from the module's source rather than with `go install`: its go.mod replaces
# github.com/dexidp/dex/api/v2 with a folder that the module's zip leaves out,
# and the api/v2 the proxy has (v2.4.0) is older than the server's gRPC API.
# So the build drops the replace and the gRPC API's registration (two lines
# of cmd/dex/serve.go); the OpenID provider is Dex's own code, unchanged. The
# tests do not use the gRPC API (no grpc: in the config).
#
# Users (password "password"): operator@example.com in group kafka-oncall,
# viewer@example.com in group kafka-dev. Client: id antidote, secret
# antidote-test-secret, redirect DEX_CONSOLE_URL + login/callback (antidote ui,
# the console package) or + ui/login/callback (the console under an admin API).
#
# Environment:
#   DEX_VERSION        module version (default below)
#   DEX_PORT           HTTP port on 127.0.0.1 (default 39556)
#   DEX_CONSOLE_URL    the console's URL the client sends browsers back to
#                      (default https://127.0.0.1:39580/)
#   ANTIDOTE_CACHE     cache folder (default .cache/ in the repository, git-ignored)
#   DEX_START_TIMEOUT  seconds to wait for Dex to answer (default 30)
set -euo pipefail
set +m

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ANTIDOTE_CACHE:-$ROOT/.cache}"
VERSION="${DEX_VERSION:-v0.0.0-20260806151424-ab64ed778070}"
PORT="${DEX_PORT:-39556}"
CONSOLE_URL="${DEX_CONSOLE_URL:-https://127.0.0.1:39580/}"
TIMEOUT="${DEX_START_TIMEOUT:-30}"
BIN="$CACHE/bin/dex"
RUN="$CACHE/dex-run-$PORT"
ISSUER="http://127.0.0.1:$PORT/dex"

die() { echo "dex.sh: $*" >&2; exit 1; }
log() { echo "dex.sh: $*" >&2; }

build() {
  if [ "$(cat "$BIN.version" 2>/dev/null)" = "$VERSION" ] && [ -x "$BIN" ]; then return 0; fi
  command -v go >/dev/null 2>&1 || die "go not found"
  log "building github.com/dexidp/dex/cmd/dex@$VERSION from the Go module proxy into $BIN"
  local dir src="$CACHE/dex-src"
  dir="$(GOWORK=off GOFLAGS=-mod=mod go mod download -json "github.com/dexidp/dex@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -d "$dir" ] || die "go mod download github.com/dexidp/dex@$VERSION gave no source folder"
  rm -rf "$src"; cp -r "$dir" "$src"; chmod -R u+w "$src"
  (
    cd "$src"
    go mod edit -dropreplace github.com/dexidp/dex/api/v2
    sed -i -e '/"github.com\/dexidp\/dex\/api\/v2"/d' -e '/"github.com\/dexidp\/dex\/server\/apiserver"/d' \
      -e 's/^\([[:space:]]*\)api\.RegisterDexServer(grpcSrv, apiserver\.NewAPI(.*$/\1_ = serv \/\/ no gRPC API: its api\/v2 is not in the module proxy/' cmd/dex/serve.go
    grep -q 'no gRPC API' cmd/dex/serve.go || die "cmd/dex/serve.go of $VERSION changed: the gRPC API's registration was not found"
    GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$BIN.tmp" ./cmd/dex
  ) >"$CACHE/dex-build.log" 2>&1 || { tail -n 30 "$CACHE/dex-build.log" >&2; die "building Dex failed (log: $CACHE/dex-build.log)"; }
  mv "$BIN.tmp" "$BIN"; echo "$VERSION" >"$BIN.version"; rm -rf "$src"
}

pid_alive() { [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; }
ready() { curl -fsS -o /dev/null --max-time 2 "$ISSUER/.well-known/openid-configuration" 2>/dev/null; }
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

config() {
  cat <<YAML
issuer: $ISSUER
storage:
  type: memory
web:
  http: 127.0.0.1:$PORT
logger:
  level: info
oauth2:
  skipApprovalScreen: true
enablePasswordDB: true
staticClients:
  - id: antidote
    name: Antidote console
    secret: antidote-test-secret
    redirectURIs:
      - '${CONSOLE_URL}login/callback'
      - '${CONSOLE_URL}ui/login/callback'
staticPasswords:
  # password: "password" (the hash of Dex's own examples)
  - email: operator@example.com
    hash: "\$2a\$10\$2b2cU8CPhOTaGrs1HRQuAueS7JTT5ZHsHSzYiFPm1leZck7Mc8T4W"
    username: operator
    userID: 9b0f4a4e-0000-4000-8000-000000000001
    groups: [kafka-oncall]
  - email: viewer@example.com
    hash: "\$2a\$10\$2b2cU8CPhOTaGrs1HRQuAueS7JTT5ZHsHSzYiFPm1leZck7Mc8T4W"
    username: viewer
    userID: 9b0f4a4e-0000-4000-8000-000000000002
    groups: [kafka-dev]
YAML
}

start() {
  mkdir -p "$CACHE/bin"
  build
  if pid_alive; then
    log "Dex already running at $ISSUER (pid $(cat "$RUN/pid"))"
    echo "$ISSUER"; return 0
  fi
  port_taken "$PORT" && die "port $PORT on 127.0.0.1 is taken by another process; set DEX_PORT"
  rm -rf "$RUN"; mkdir -p "$RUN"
  config >"$RUN/config.yaml"
  echo "$CONSOLE_URL" >"$RUN/console-url"
  setsid "$BIN" serve "$RUN/config.yaml" >>"$RUN/dex.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local deadline=$((SECONDS + TIMEOUT))
  until ready; do
    if ! pid_alive; then tail -n 30 "$RUN/dex.log" >&2 || true; die "Dex exited during startup (log: $RUN/dex.log)"; fi
    if [ $SECONDS -ge $deadline ]; then tail -n 30 "$RUN/dex.log" >&2 || true; stop_quiet; die "Dex did not answer within ${TIMEOUT}s"; fi
    sleep 0.2
  done
  log "Dex ready at $ISSUER (pid $(cat "$RUN/pid")), client antidote for ${CONSOLE_URL}"
  echo "$ISSUER"
}

stop_quiet() {
  if [ -f "$RUN/pid" ]; then
    local pid; pid="$(cat "$RUN/pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$RUN"
}

case "${1:-}" in
  start) start ;;
  stop) stop_quiet; log "stopped (port $PORT)" ;;
  status) if pid_alive; then echo "$ISSUER"; else log "not running"; exit 1; fi ;;
  env)
    pid_alive || die "not running"
    echo "export ANTIDOTE_OIDC_ISSUER=$ISSUER"
    echo "export ANTIDOTE_OIDC_CONSOLE=$(cat "$RUN/console-url")" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
