#!/usr/bin/env bash
# scripts/kafka.sh: a real, single-node Apache Kafka broker (KRaft, combined
# broker+controller) on loopback, for the integration tests.
#
#   scripts/kafka.sh start    resolve jars (cached), format storage, start, wait until ready
#   scripts/kafka.sh stop     stop the broker and remove its storage
#   scripts/kafka.sh status   print the address and exit 0 if a broker is running
#   scripts/kafka.sh env      print "export ANTIDOTE_KAFKA_BROKERS=..." for a running broker
#
# Environment:
#   KAFKA_VERSION       Apache Kafka version from Maven Central (default: from scripts/kafka/pom.xml)
#   KAFKA_PORT          client listener port on 127.0.0.1 (default 39092; controller is port+1)
#   ANTIDOTE_CACHE      cache folder for jars (default .cache/ in the repository, git-ignored)
#   KAFKA_START_TIMEOUT seconds to wait for the broker to answer (default 90)
#
# Starting twice is safe (the second start sees the running broker and returns);
# stopping twice is safe; stop leaves no process behind.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ANTIDOTE_CACHE:-$ROOT/.cache}"
PORT="${KAFKA_PORT:-39092}"
CPORT=$((PORT + 1))
RUN="$CACHE/kafka-run-$PORT"
TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
POM="$ROOT/scripts/kafka/pom.xml"
VERSION="${KAFKA_VERSION:-$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")}"
JARS="$CACHE/kafka-$VERSION/libs"

die() { echo "kafka.sh: $*" >&2; exit 1; }
log() { echo "kafka.sh: $*" >&2; }

need_tools() {
  command -v java >/dev/null 2>&1 ||
    die "java not found: Apache Kafka $VERSION needs Java 17 or later (Debian: apt-get install openjdk-17-jre-headless)"
  command -v mvn >/dev/null 2>&1 ||
    die "mvn not found: the broker's jars are resolved from Maven Central with Maven (Debian: apt-get install maven)"
  local jv
  jv="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
  [ -n "$jv" ] && [ "$jv" -ge 17 ] || die "java $jv found, Apache Kafka $VERSION needs Java 17 or later"
}

resolve() {
  # The cache is keyed by the version and by the pom's content: editing the
  # pom resolves again.
  local key; key="$VERSION $(sha256sum "$POM" | cut -c1-16)"
  if [ "$(cat "$JARS/.complete" 2>/dev/null)" = "$key" ]; then return 0; fi
  log "resolving org.apache.kafka:kafka_2.13:$VERSION from Maven Central into $JARS"
  rm -rf "$JARS"; mkdir -p "$JARS"
  mkdir -p "$CACHE"
  mvn -B -f "$POM" -Dkafka.version="$VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$JARS" >"$CACHE/mvn.log" 2>&1 ||
    { tail -30 "$CACHE/mvn.log" >&2; die "mvn could not resolve Apache Kafka $VERSION (is Maven Central reachable? full log: $CACHE/mvn.log)"; }
  ls "$JARS"/kafka_2.13-"$VERSION".jar >/dev/null 2>&1 || die "kafka_2.13-$VERSION.jar missing after resolve"
  echo "$key" >"$JARS/.complete"
}

pid_alive() { [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; }

# ready: the broker answers a metadata request (ApiVersions + Metadata) on the
# client port: Kafka's own topic tool lists topics.
ready() {
  java -cp "$JARS/*" -Dlog4j2.configurationFile="$RUN/log4j2.properties" \
    org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$PORT" --list >/dev/null 2>&1
}

write_config() {
  mkdir -p "$RUN/data"
  cat >"$RUN/server.properties" <<CONF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$RUN/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.flush.interval.messages=9223372036854775807
CONF
  cat >"$RUN/log4j2.properties" <<CONF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $RUN/broker.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
CONF
}

start() {
  need_tools
  resolve
  if pid_alive; then
    log "Apache Kafka $VERSION already running on 127.0.0.1:$PORT (pid $(cat "$RUN/pid"))"
    echo "127.0.0.1:$PORT"; return 0
  fi
  stop_quiet
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    die "port $PORT on 127.0.0.1 is taken by another process; set KAFKA_PORT"
  fi
  write_config
  local cp="$JARS/*" jopts=(-Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$RUN/log4j2.properties")
  java -cp "$cp" "${jopts[@]}" kafka.tools.StorageTool format \
    -t "$(java -cp "$cp" "${jopts[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null)" \
    -c "$RUN/server.properties" >"$RUN/format.log" 2>&1 ||
    { cat "$RUN/format.log" >&2; die "formatting KRaft storage failed"; }
  log "starting Apache Kafka $VERSION (KRaft, single node) on 127.0.0.1:$PORT"
  setsid java -cp "$cp" "${jopts[@]}" kafka.Kafka "$RUN/server.properties" \
    >"$RUN/stdout.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local deadline=$((SECONDS + TIMEOUT))
  until grep -q "Kafka Server started" "$RUN/broker.log" 2>/dev/null && ready; do
    if ! pid_alive; then
      tail -40 "$RUN/stdout.log" "$RUN/broker.log" >&2 2>/dev/null || true
      die "broker exited during startup (logs in $RUN)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -40 "$RUN/broker.log" >&2 2>/dev/null || true
      stop_quiet; die "broker did not answer within ${TIMEOUT}s"
    fi
    sleep 0.5
  done
  log "Apache Kafka $VERSION ready on 127.0.0.1:$PORT (pid $(cat "$RUN/pid"))"
  echo "127.0.0.1:$PORT"
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
  status)
    if pid_alive; then echo "127.0.0.1:$PORT"; else log "not running"; exit 1; fi ;;
  env)
    pid_alive || die "not running"; echo "export ANTIDOTE_KAFKA_BROKERS=127.0.0.1:$PORT" ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 start|stop|status|env|version" >&2; exit 2 ;;
esac
