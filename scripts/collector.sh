#!/usr/bin/env bash
# scripts/collector.sh: a real OpenTelemetry Collector on loopback for the trace tests
# (trace/otel). It is built here from the Go module proxy with the Collector's builder
# (ocb, go.opentelemetry.io/collector/cmd/builder) from scripts/collector/manifest.yaml:
# the OTLP receiver (core) and the file exporter (contrib), nothing else. Spans sent to it
# over OTLP are written as OTLP JSON lines to a file the test reads back.
#
#   scripts/collector.sh start    build (cached), start, wait until it listens; print its OTLP/HTTP URL
#   scripts/collector.sh stop     stop the collector and remove its files
#   scripts/collector.sh status   print the OTLP/HTTP URL and exit 0 if one is running
#   scripts/collector.sh env      print the exports the trace tests read, for a running collector:
#                                 ANTIDOTE_OTLP_ENDPOINT (the OTLP/HTTP URL) and ANTIDOTE_OTLP_FILE
#                                 (the file the spans are written to, OTLP JSON, a request a line)
#   scripts/collector.sh build    build (cached) and print the binary's path
#   scripts/collector.sh version  print the Collector version
#
# Environment:
#   COLLECTOR_PORT           OTLP/gRPC port on 127.0.0.1 (default 39310); OTLP/HTTP
#                            listens on port+1
#   ANTIDOTE_CACHE           cache folder (default .cache/ in the repository, git-ignored)
#   COLLECTOR_START_TIMEOUT  seconds to wait for the collector to listen (default 30)
#
# The first build takes a few minutes (the modules are downloaded and compiled once);
# later starts use the cached binary, keyed by the manifest. Starting twice is safe;
# stop leaves no process and no file behind.
set -euo pipefail
set +m # see scripts/opensearch.sh: $! must name the server

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ANTIDOTE_CACHE:-$ROOT/.cache}"
PORT="${COLLECTOR_PORT:-39310}"
HPORT=$((PORT + 1))
RUN="$CACHE/collector-run-$PORT"
TIMEOUT="${COLLECTOR_START_TIMEOUT:-30}"
MANIFEST="$ROOT/scripts/collector/manifest.yaml"
VERSION="$(sed -n 's/^ *version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$MANIFEST" | head -1)"
BUILDER_VERSION="$(sed -n 's/^# builder: *//p' "$MANIFEST")"
STABLE_VERSION="$(sed -n 's/^# stable: *\([^ ]*\).*/\1/p' "$MANIFEST")"
BUILD="$CACHE/otelcol-$VERSION"
BIN="$BUILD/antidote-otelcol"

die() { echo "collector.sh: $*" >&2; exit 1; }
log() { echo "collector.sh: $*" >&2; }

# build compiles the collector once per manifest. GOWORK=off: the build folder is
# under the repository, whose go.work must not take the collector's modules in.
build() {
  local key; key="$(sha256sum "$MANIFEST" | cut -c1-16)"
  if [ -x "$BIN" ] && [ "$(cat "$BUILD/.complete" 2>/dev/null)" = "$key" ]; then return 0; fi
  command -v go >/dev/null || die "go not found"
  mkdir -p "$BUILD"
  log "building the OpenTelemetry Collector $VERSION (builder $BUILDER_VERSION) into $BUILD; the first build takes a few minutes"
  GOWORK=off GOBIN="$BUILD/bin" go install "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION" ||
    die "could not install the Collector's builder from the module proxy"
  rm -rf "$BUILD/src"
  sed "s#@OUT@#$BUILD/src#" "$MANIFEST" >"$BUILD/manifest.yaml"
  # The builder only writes the sources: its `go mod tidy` would also fetch the
  # components' test dependencies, some of which the module proxy does not serve.
  # The go.mod is written here (the components at the manifest's versions, the
  # Collector's own modules at the matching ones), and go build -mod=mod resolves
  # what the binary needs.
  (cd "$BUILD" && GOWORK=off "$BUILD/bin/builder" --skip-compilation --skip-get-modules --config "$BUILD/manifest.yaml" &&
    cd "$BUILD/src" && {
      printf 'module antidote-otelcol\n\ngo 1.25\n\nrequire (\n'
      sed -n 's/^ *- gomod: *\([^ ]*\) \([^ ]*\).*/\t\1 \2/p' "$MANIFEST"
      printf '\tgo.opentelemetry.io/collector/otelcol v%s\n' "$VERSION"
      for p in env file http https yaml; do
        printf '\tgo.opentelemetry.io/collector/confmap/provider/%sprovider %s\n' "$p" "$STABLE_VERSION"
      done
      printf ')\n'
    } >go.mod &&
    GOWORK=off GOFLAGS=-mod=mod go build -trimpath -ldflags=-s -o "$BIN" .) >"$BUILD/build.log" 2>&1 ||
    { tail -n 30 "$BUILD/build.log" >&2; die "the Collector did not build (full log: $BUILD/build.log)"; }
  echo "$key" >"$BUILD/.complete"
}

pid_alive() { [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; }

# ready: the OTLP/HTTP port answers (any status: a GET of /v1/traces is refused).
ready() {
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$HPORT/v1/traces" 2>/dev/null || true)"
  [ -n "$code" ] && [ "$code" != 000 ]
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

config() {
  cat <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$PORT
      http:
        endpoint: 127.0.0.1:$HPORT
exporters:
  file:
    path: $RUN/spans.jsonl
    flush_interval: 100ms
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
EOF
}

start() {
  command -v curl >/dev/null 2>&1 || die "curl not found: the readiness check needs it (Debian: apt-get install curl)"
  mkdir -p "$CACHE"
  build
  if pid_alive; then
    log "collector already running on 127.0.0.1:$PORT (pid $(cat "$RUN/pid"))"
    echo "http://127.0.0.1:$HPORT"; return 0
  fi
  for p in $PORT $HPORT; do
    port_taken "$p" && die "port $p on 127.0.0.1 is taken by another process; set COLLECTOR_PORT"
  done
  rm -rf "$RUN"; mkdir -p "$RUN"
  config >"$RUN/config.yaml"
  : >"$RUN/spans.jsonl"
  setsid "$BIN" --config "$RUN/config.yaml" >>"$RUN/collector.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local deadline=$((SECONDS + TIMEOUT))
  until ready; do
    if ! pid_alive; then
      tail -n 40 "$RUN/collector.log" >&2 2>/dev/null || true
      die "the collector exited during startup (log: $RUN/collector.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$RUN/collector.log" >&2 2>/dev/null || true
      stop_quiet; die "the collector did not listen within ${TIMEOUT}s"
    fi
    sleep 0.2
  done
  log "collector $VERSION ready: OTLP/gRPC 127.0.0.1:$PORT, OTLP/HTTP 127.0.0.1:$HPORT, spans in $RUN/spans.jsonl (pid $(cat "$RUN/pid"))"
  echo "http://127.0.0.1:$HPORT"
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
  status)
    if pid_alive; then echo "http://127.0.0.1:$HPORT"; else log "not running"; exit 1; fi ;;
  env)
    pid_alive || die "not running"
    echo "export ANTIDOTE_OTLP_ENDPOINT=http://127.0.0.1:$HPORT"
    echo "export ANTIDOTE_OTLP_FILE=$RUN/spans.jsonl" ;;
  build) build; echo "$BIN" ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 start|stop|status|env|build|version" >&2; exit 2 ;;
esac
