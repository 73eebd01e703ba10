#!/usr/bin/env bash
# scripts/registry.sh: a real schema registry, Apicurio Registry (the
# ready-to-run Quarkus build from Maven Central), on loopback, for the
# integration tests. Its Confluent-compatible API is at
# http://127.0.0.1:PORT/apis/ccompat/v7.
#
#   scripts/registry.sh start    fetch (cached), start, wait until it answers; print the ccompat URL
#   scripts/registry.sh stop     stop the registry and remove its storage
#   scripts/registry.sh kill     SIGKILL the registry, keeping its storage (a crash; start again after)
#   scripts/registry.sh status   print the ccompat URL and exit 0 if a registry is running
#   scripts/registry.sh env      print "export ANTIDOTE_SCHEMA_REGISTRY_URL=..." for a running registry
#   scripts/registry.sh pid      print the registry's process id
#
# Environment:
#   REGISTRY_VERSION        Apicurio Registry version (default: from scripts/registry/pom.xml)
#   REGISTRY_PORT           HTTP port on 127.0.0.1 (default 39080); the management interface
#                           (health, metrics) listens on 127.0.0.1:port+1
#   REGISTRY_JAVA           a java binary (Java 21 or later) to use instead of searching
#   ANTIDOTE_CACHE          cache folder (default .cache/ in the repository, git-ignored)
#   REGISTRY_START_TIMEOUT  seconds to wait for the registry to answer (default 120)
#
# Storage is an H2 database in files with WRITE_DELAY=0: every write is on
# disk when the request returns, so schema ids survive a kill -9. Starting
# twice is safe (the second start sees the running registry and returns);
# a start after a kill keeps the storage; stop leaves no process and no
# storage behind.
set -euo pipefail
# Job control off even when the caller exported SHELLOPTS with monitor: with
# it on, a background job leads its own process group, setsid forks again and
# $! names a process that exits at once while the server runs on, unowned.
set +m

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ANTIDOTE_CACHE:-$ROOT/.cache}"
PORT="${REGISTRY_PORT:-39080}"
MPORT=$((PORT + 1))
RUN="$CACHE/registry-run-$PORT"
TIMEOUT="${REGISTRY_START_TIMEOUT:-120}"
POM="$ROOT/scripts/registry/pom.xml"
VERSION="${REGISTRY_VERSION:-$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' "$POM")}"
APP="$CACHE/apicurio-registry-$VERSION"
URL="http://127.0.0.1:$PORT/apis/ccompat/v7"
MIN_JAVA=21

die() { echo "registry.sh: $*" >&2; exit 1; }
log() { echo "registry.sh: $*" >&2; }

# java_major prints the major version of a java binary, or nothing.
java_major() {
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1
}

# find_java prints a java binary of version MIN_JAVA or later: REGISTRY_JAVA,
# JAVA_HOME, the java on PATH, then every JDK or JRE under /usr/lib/jvm
# (the newest first).
find_java() {
  local c v seen=""
  if [ -n "${REGISTRY_JAVA:-}" ]; then
    v="$(java_major "$REGISTRY_JAVA")"
    [ -n "$v" ] && [ "$v" -ge $MIN_JAVA ] && { echo "$REGISTRY_JAVA"; return 0; }
    die "REGISTRY_JAVA=$REGISTRY_JAVA is Java ${v:-?}; Apicurio Registry $VERSION needs Java $MIN_JAVA or later"
  fi
  for c in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java 2>/dev/null || true)" \
    $(ls -d /usr/lib/jvm/*/bin/java 2>/dev/null | sort -rV); do
    [ -x "$c" ] || continue
    v="$(java_major "$c")"
    seen="$seen $c (Java ${v:-?});"
    if [ -n "$v" ] && [ "$v" -ge $MIN_JAVA ]; then echo "$c"; return 0; fi
  done
  die "no Java $MIN_JAVA or later found (Apicurio Registry $VERSION needs it); looked at JAVA_HOME, PATH and /usr/lib/jvm:${seen:- nothing there} Install one (Debian: apt-get install openjdk-21-jre-headless, or a Temurin 21+ JDK) or set REGISTRY_JAVA"
}

need_tools() {
  command -v mvn >/dev/null 2>&1 ||
    die "mvn not found: Apicurio Registry is fetched from Maven Central with Maven (Debian: apt-get install maven)"
  command -v curl >/dev/null 2>&1 || die "curl not found: the readiness check needs it (Debian: apt-get install curl)"
  JAVA="$(find_java)"
}

fetch() {
  # The cache is keyed by the version and by the pom's content.
  local key; key="$VERSION $(sha256sum "$POM" | cut -c1-16)"
  if [ "$(cat "$APP/.complete" 2>/dev/null)" = "$key" ]; then return 0; fi
  log "fetching io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all from Maven Central into $APP"
  rm -rf "$APP"; mkdir -p "$APP"
  mvn -B -f "$POM" -Dapicurio.version="$VERSION" -DoutputDirectory="$APP" \
    dependency:unpack >"$CACHE/mvn-registry.log" 2>&1 ||
    { tail -n 30 "$CACHE/mvn-registry.log" >&2; die "mvn could not fetch Apicurio Registry $VERSION (is Maven Central reachable? full log: $CACHE/mvn-registry.log)"; }
  [ -f "$APP/quarkus-run.jar" ] || die "quarkus-run.jar missing in $APP after the fetch"
  echo "$key" >"$APP/.complete"
}

pid_alive() { [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; }

# ready: the Confluent-compatible API answers.
ready() {
  curl -fsS -o /dev/null --max-time 2 "$URL/schemas/types" 2>/dev/null
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  need_tools
  fetch
  if pid_alive; then
    log "Apicurio Registry $VERSION already running at $URL (pid $(cat "$RUN/pid"))"
    echo "$URL"; return 0
  fi
  for p in $PORT $MPORT; do
    port_taken "$p" && die "port $p on 127.0.0.1 is taken by another process; set REGISTRY_PORT"
  done
  mkdir -p "$RUN/data"
  local kept=""; [ -e "$RUN/data/registry.mv.db" ] && kept=" (storage kept from the last run)"
  log "starting Apicurio Registry $VERSION on 127.0.0.1:$PORT with $("$JAVA" -version 2>&1 | head -1)$kept"
  # Every listener on loopback: the HTTP API and the management interface
  # (health, metrics; Quarkus puts it on 0.0.0.0:9000 by default).
  setsid "$JAVA" -Xms128m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$PORT" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$MPORT" \
    -Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2 \
    "-Dapicurio.datasource.url=jdbc:h2:file:$RUN/data/registry;WRITE_DELAY=0" \
    -Dapicurio.datasource.jdbc.initial-size=2 -Dapicurio.datasource.jdbc.min-size=2 \
    -Dquarkus.http.access-log.enabled=false \
    -jar "$APP/quarkus-run.jar" >>"$RUN/registry.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local deadline=$((SECONDS + TIMEOUT))
  until ready; do
    if ! pid_alive; then
      tail -n 40 "$RUN/registry.log" >&2 2>/dev/null || true
      die "registry exited during startup (log: $RUN/registry.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$RUN/registry.log" >&2 2>/dev/null || true
      kill_quiet; die "registry did not answer within ${TIMEOUT}s (log: $RUN/registry.log)"
    fi
    sleep 0.2
  done
  log "Apicurio Registry $VERSION ready at $URL (pid $(cat "$RUN/pid"))"
  echo "$URL"
}

# kill_quiet: SIGKILL the registry, keep its storage.
kill_quiet() {
  if [ -f "$RUN/pid" ]; then
    local pid; pid="$(cat "$RUN/pid")"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$RUN/pid"
  fi
}

stop_quiet() {
  if [ -f "$RUN/pid" ]; then
    local pid; pid="$(cat "$RUN/pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  fi
  rm -rf "$RUN"
}

case "${1:-}" in
  start) start ;;
  stop) stop_quiet; log "stopped (port $PORT)" ;;
  kill) kill_quiet; log "killed (port $PORT); storage kept in $RUN/data" ;;
  status)
    if pid_alive; then echo "$URL"; else log "not running"; exit 1; fi ;;
  env)
    pid_alive || die "not running"; echo "export ANTIDOTE_SCHEMA_REGISTRY_URL=$URL" ;;
  pid)
    pid_alive || die "not running"; cat "$RUN/pid" ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 start|stop|kill|status|env|pid|version" >&2; exit 2 ;;
esac
