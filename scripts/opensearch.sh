#!/usr/bin/env bash
# scripts/opensearch.sh: a real OpenSearch node on loopback for the
# integration tests of the search-engine sink. Its jars come from Maven
# Central (scripts/opensearch/pom.xml: the server, the netty4 transport and
# the common analysers, no distribution archive); a small launcher
# (scripts/opensearch/TestNode.java, compiled here) starts a single-node
# cluster with those plugins from the class path.
#
#   scripts/opensearch.sh start    fetch (cached), start, wait until it answers; print the URL
#   scripts/opensearch.sh stop     stop the node and remove its data
#   scripts/opensearch.sh status   print the URL and exit 0 if a node is running
#   scripts/opensearch.sh env      print "export ANTIDOTE_OPENSEARCH_URL=..." for a running node
#   scripts/opensearch.sh pid      print the node's process id (tests SIGSTOP it)
#   scripts/opensearch.sh version  print the OpenSearch version
#
# Environment:
#   OPENSEARCH_VERSION        version (default: from scripts/opensearch/pom.xml; 2.x runs on Java 17)
#   OPENSEARCH_PORT           HTTP port on 127.0.0.1 (default 39280); the node's transport
#                             listens on 127.0.0.1:port+1
#   OPENSEARCH_JAVA           a java binary (Java 17 or later) to use instead of searching
#   OPENSEARCH_HEAP           heap size (default 512m)
#   ANTIDOTE_CACHE            cache folder (default .cache/ in the repository, git-ignored)
#   OPENSEARCH_START_TIMEOUT  seconds to wait for the node to answer (default 90)
#
# Starting twice is safe (the second start sees the running node and
# returns); stop leaves no process and no data behind.
set -euo pipefail
# Job control off even when the caller exported SHELLOPTS with monitor: with
# it on, a background job leads its own process group, setsid forks again and
# $! names a process that exits at once while the server runs on, unowned.
set +m

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ANTIDOTE_CACHE:-$ROOT/.cache}"
PORT="${OPENSEARCH_PORT:-39280}"
TPORT=$((PORT + 1))
RUN="$CACHE/opensearch-run-$PORT"
TIMEOUT="${OPENSEARCH_START_TIMEOUT:-90}"
HEAP="${OPENSEARCH_HEAP:-512m}"
POM="$ROOT/scripts/opensearch/pom.xml"
SRC="$ROOT/scripts/opensearch/TestNode.java"
VERSION="${OPENSEARCH_VERSION:-$(sed -n 's:.*<opensearch.version>\(.*\)</opensearch.version>.*:\1:p' "$POM")}"
JARS="$CACHE/opensearch-$VERSION"
URL="http://127.0.0.1:$PORT"
MIN_JAVA=17

die() { echo "opensearch.sh: $*" >&2; exit 1; }
log() { echo "opensearch.sh: $*" >&2; }

java_major() {
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1
}

# find_java prints a java binary of version MIN_JAVA or later: OPENSEARCH_JAVA,
# JAVA_HOME, the java on PATH, then every JDK under /usr/lib/jvm. A JDK is
# needed (javac compiles the launcher).
find_java() {
  local c v seen=""
  if [ -n "${OPENSEARCH_JAVA:-}" ]; then
    v="$(java_major "$OPENSEARCH_JAVA")"
    [ -n "$v" ] && [ "$v" -ge $MIN_JAVA ] && { echo "$OPENSEARCH_JAVA"; return 0; }
    die "OPENSEARCH_JAVA=$OPENSEARCH_JAVA is Java ${v:-?}; OpenSearch $VERSION needs Java $MIN_JAVA or later"
  fi
  for c in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java 2>/dev/null || true)" \
    $(ls -d /usr/lib/jvm/*/bin/java 2>/dev/null | sort -V); do
    [ -x "$c" ] && [ -x "$(dirname "$c")/javac" ] || continue
    v="$(java_major "$c")"
    seen="$seen $c (Java ${v:-?});"
    if [ -n "$v" ] && [ "$v" -ge $MIN_JAVA ]; then echo "$c"; return 0; fi
  done
  die "no JDK $MIN_JAVA or later found (OpenSearch $VERSION needs one, with javac); looked at JAVA_HOME, PATH and /usr/lib/jvm:${seen:- nothing there} Install one (Debian: apt-get install openjdk-17-jdk-headless) or set OPENSEARCH_JAVA"
}

need_tools() {
  command -v mvn >/dev/null 2>&1 ||
    die "mvn not found: OpenSearch's jars are resolved from Maven Central with Maven (Debian: apt-get install maven)"
  command -v curl >/dev/null 2>&1 || die "curl not found: the readiness check needs it (Debian: apt-get install curl)"
  JAVA="$(find_java)"
}

# fetch resolves the jars and compiles the launcher; the cache is keyed by
# the version, the pom and the launcher's source.
fetch() {
  local key; key="$VERSION $(cat "$POM" "$SRC" | sha256sum | cut -c1-16)"
  if [ "$(cat "$JARS/.complete" 2>/dev/null)" = "$key" ]; then return 0; fi
  log "resolving org.opensearch:opensearch:$VERSION and its plugins from Maven Central into $JARS"
  rm -rf "$JARS"; mkdir -p "$JARS/lib" "$JARS/classes"
  mvn -B -f "$POM" -Dopensearch.version="$VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$JARS/lib" >"$CACHE/mvn-opensearch.log" 2>&1 ||
    { tail -n 30 "$CACHE/mvn-opensearch.log" >&2; die "mvn could not resolve OpenSearch $VERSION (is Maven Central reachable? full log: $CACHE/mvn-opensearch.log)"; }
  "$(dirname "$JAVA")/javac" -nowarn -d "$JARS/classes" -cp "$JARS/lib/*" "$SRC" ||
    die "the launcher $SRC did not compile against OpenSearch $VERSION"
  echo "$key" >"$JARS/.complete"
}

pid_alive() { [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; }

# ready: the cluster answers and its health is yellow or green (one node:
# replicas stay unassigned).
ready() {
  curl -fsS -o /dev/null --max-time 2 "$URL/_cluster/health?wait_for_status=yellow&timeout=1s" 2>/dev/null
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  mkdir -p "$CACHE"
  need_tools
  fetch
  if pid_alive; then
    log "OpenSearch $VERSION already running at $URL (pid $(cat "$RUN/pid"))"
    echo "$URL"; return 0
  fi
  for p in $PORT $TPORT; do
    port_taken "$p" && die "port $p on 127.0.0.1 is taken by another process; set OPENSEARCH_PORT"
  done
  rm -rf "$RUN"; mkdir -p "$RUN/home/config"
  log "starting OpenSearch $VERSION on 127.0.0.1:$PORT with $("$JAVA" -version 2>&1 | head -1)"
  setsid "$JAVA" "-Xms$HEAP" "-Xmx$HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.disable.jmx=true -Dio.netty.allocator.numDirectArenas=0 \
    -cp "$JARS/lib/*:$JARS/classes" TestNode "$RUN/home" "$PORT" "$TPORT" \
    >>"$RUN/opensearch.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local deadline=$((SECONDS + TIMEOUT))
  until ready; do
    if ! pid_alive; then
      tail -n 40 "$RUN/opensearch.log" >&2 2>/dev/null || true
      die "OpenSearch exited during startup (log: $RUN/opensearch.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$RUN/opensearch.log" >&2 2>/dev/null || true
      stop_quiet; die "OpenSearch did not answer within ${TIMEOUT}s"
    fi
    sleep 0.2
  done
  log "OpenSearch $VERSION ready at $URL (pid $(cat "$RUN/pid"))"
  echo "$URL"
}

stop_quiet() {
  if [ -f "$RUN/pid" ]; then
    local pid; pid="$(cat "$RUN/pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -CONT "$pid" 2>/dev/null || true # a test may have left it stopped
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
  status)
    if pid_alive; then echo "$URL"; else log "not running"; exit 1; fi ;;
  env)
    pid_alive || die "not running"; echo "export ANTIDOTE_OPENSEARCH_URL=$URL" ;;
  pid)
    pid_alive || die "not running"; cat "$RUN/pid" ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 start|stop|status|env|pid|version" >&2; exit 2 ;;
esac
