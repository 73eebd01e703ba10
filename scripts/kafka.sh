#!/usr/bin/env bash
# scripts/kafka.sh: a real, single-node Apache Kafka broker (KRaft, combined
# broker+controller) on loopback, for the integration tests.
#
#   scripts/kafka.sh start    resolve jars (cached), format storage, start, wait until ready
#   scripts/kafka.sh stop     stop the broker and remove its storage
#   scripts/kafka.sh status   print the address and exit 0 if a broker is running
#   scripts/kafka.sh env      print the export lines the tests read (see below) for a running broker
#
# The broker has a second client listener, SASL_SSL on port+2, for the tests of
# TLS and SASL: a certificate authority, a broker certificate (127.0.0.1,
# localhost) and a client certificate are generated with openssl into the run
# folder; the mechanisms are PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (the SCRAM user
# is created when the storage is formatted) and OAUTHBEARER (unsecured JWTs,
# for tests). `env` prints, and $RUN/test.env holds:
#   ANTIDOTE_KAFKA_BROKERS        the PLAINTEXT listener
#   ANTIDOTE_KAFKA_SASL_BROKERS   the SASL_SSL listener (port+2)
#   ANTIDOTE_KAFKA_SASL_USERNAME, ANTIDOTE_KAFKA_SASL_PASSWORD  the user (all mechanisms)
#   ANTIDOTE_KAFKA_TLS_CA         the CA certificate (PEM) that signed the broker's
#   ANTIDOTE_KAFKA_TLS_CERT, ANTIDOTE_KAFKA_TLS_KEY  a client certificate the CA signed
# Without openssl the SASL_SSL listener is left out (with a warning).
#
# Share groups (KIP-932) are on from Kafka 4.2 (the share.version feature that
# formatting sets); their sessions are short (10s, heartbeats every second) and
# a group may set its record lock down to 1s, so that the tests of a killed
# member or a renewed lock run in seconds. Earlier versions take the settings
# and have no share groups.
#
# Environment:
#   KAFKA_VERSION       Apache Kafka version from Maven Central (default: from scripts/kafka/pom.xml,
#                       4.4.0: share groups and their broker dead-letter topics)
#   KAFKA_PORT          client listener port on 127.0.0.1 (default 39092; controller is port+1)
#   ANTIDOTE_CACHE      cache folder for jars (default .cache/ in the repository, git-ignored)
#   KAFKA_START_TIMEOUT seconds to wait for the broker to answer (default 90)
#
# Starting twice is safe (the second start sees the running broker and returns);
# stopping twice is safe; stop leaves no process behind.
#
# Three-broker mode, for the randomized fault runs (chaos/) and replication tests:
#
#   scripts/kafka.sh cluster start       format three nodes, start them, wait until ready;
#                                        prints the bootstrap addresses (comma-separated)
#   scripts/kafka.sh cluster stop        stop every node and remove the storage
#   scripts/kafka.sh cluster status      print the bootstrap addresses and each node's state
#   scripts/kafka.sh cluster env         print ANTIDOTE_KAFKA_BROKERS for the cluster
#   scripts/kafka.sh cluster kill N      SIGKILL node N (1-3); its data stays for restart
#   scripts/kafka.sh cluster hang N      SIGSTOP node N (a hung broker)
#   scripts/kafka.sh cluster cont N      SIGCONT node N
#   scripts/kafka.sh cluster restart N   start node N again on its data dir (after kill), wait for it
#   scripts/kafka.sh cluster pid N       print node N's pid (exit 1 if it is not running)
#   scripts/kafka.sh cluster leader TOPIC PART   print the node id leading TOPIC/PART
#
# Each node is a combined broker+controller and the three are the KRaft voters:
# three JVMs instead of six on a small machine, and the quorum (2 of 3) survives
# any one node killed or hung, which is what the fault runs do. New topics get
# replication factor 3 and min.insync.replicas=2, the internal topics too
# (offsets, transactions). KIP-848 group sessions are short (10s, heartbeats
# every second), so that a killed member's partitions move within seconds.
# Node N's client listener is 127.0.0.1:KAFKA_CLUSTER_PORT+N-1 (default
# 39192-39194), its controller listener that port + 10 (39202-39204): no clash
# with the single-node broker (39092-39094). Each JVM gets a small
# heap (KAFKA_CLUSTER_HEAP, default 384m). No SASL listener in this mode.
set -euo pipefail
# Job control off even when the caller exported SHELLOPTS with monitor: with
# it on, a background job leads its own process group, setsid forks again and
# $! names a process that exits at once while the server runs on, unowned.
set +m

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ANTIDOTE_CACHE:-$ROOT/.cache}"
PORT="${KAFKA_PORT:-39092}"
CPORT=$((PORT + 1))
SPORT=$((PORT + 2))
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
    { tail -n 30 "$CACHE/mvn.log" >&2; die "mvn could not resolve Apache Kafka $VERSION (is Maven Central reachable? full log: $CACHE/mvn.log)"; }
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

# make_tls generates the certificates and the SASL user's password into
# $RUN/tls; it returns 1 when openssl is missing.
make_tls() {
  command -v openssl >/dev/null 2>&1 || return 1
  local d="$RUN/tls" pass
  mkdir -p "$d"
  pass="$(openssl rand -hex 12)"
  echo "$pass" >"$d/store.pass"
  openssl rand -hex 16 >"$d/sasl.pass"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=antidote test CA" \
      -keyout "$d/ca.key" -out "$d/ca.pem"
    for who in broker client; do
      openssl req -newkey rsa:2048 -nodes -subj "/CN=antidote-test-$who" -keyout "$d/$who.key" -out "$d/$who.csr"
      local usage=serverAuth; [ "$who" = client ] && usage=clientAuth
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=%s\n' "$usage" >"$d/$who.ext"
      openssl x509 -req -days 7 -in "$d/$who.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -extfile "$d/$who.ext" -out "$d/$who.pem"
    done
    openssl pkcs12 -export -in "$d/broker.pem" -inkey "$d/broker.key" -certfile "$d/ca.pem" \
      -name broker -out "$d/broker.p12" -passout "pass:$pass"
    keytool -importcert -noprompt -alias ca -file "$d/ca.pem" -keystore "$d/truststore.p12" \
      -storetype PKCS12 -storepass "$pass"
  } >"$RUN/tls.log" 2>&1 || { cat "$RUN/tls.log" >&2; die "generating the test certificates failed"; }
}

write_config() {
  mkdir -p "$RUN/data"
  local listeners="PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT"
  local advertised="PLAINTEXT://127.0.0.1:$PORT" protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  local sasl=""
  if [ -f "$RUN/tls/sasl.pass" ]; then
    listeners="$listeners,SASL_SSL://127.0.0.1:$SPORT"
    advertised="$advertised,SASL_SSL://127.0.0.1:$SPORT"
    protocols="$protocols,SASL_SSL:SASL_SSL"
    local spass; spass="$(cat "$RUN/tls/store.pass")"
    local l=listener.name.sasl_ssl
    sasl="sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
$l.ssl.keystore.location=$RUN/tls/broker.p12
$l.ssl.keystore.type=PKCS12
$l.ssl.keystore.password=$spass
$l.ssl.key.password=$spass
$l.ssl.truststore.location=$RUN/tls/truststore.p12
$l.ssl.truststore.type=PKCS12
$l.ssl.truststore.password=$spass
$l.ssl.client.auth=requested
$l.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_antidote=\"$(cat "$RUN/tls/sasl.pass")\";
$l.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
$l.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
$l.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"antidote\";"
  fi
  cat >"$RUN/server.properties" <<CONF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
$sasl
log.dirs=$RUN/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.share.min.session.timeout.ms=6000
group.share.session.timeout.ms=10000
group.share.min.heartbeat.interval.ms=500
group.share.heartbeat.interval.ms=1000
group.share.min.record.lock.duration.ms=1000
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
  for p in "$PORT" "$CPORT" "$SPORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      die "port $p on 127.0.0.1 is taken by another process; set KAFKA_PORT"
    fi
  done
  mkdir -p "$RUN"
  make_tls || log "WARNING: openssl not found: no SASL_SSL listener on 127.0.0.1:$SPORT (the TLS and SASL tests skip)"
  write_config
  local scram=()
  if [ -f "$RUN/tls/sasl.pass" ]; then
    local sp; sp="$(cat "$RUN/tls/sasl.pass")"
    scram=(--add-scram "SCRAM-SHA-256=[name=antidote,password=$sp]" --add-scram "SCRAM-SHA-512=[name=antidote,password=$sp]")
  fi
  local cp="$JARS/*" jopts=(-Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$RUN/log4j2.properties")
  java -cp "$cp" "${jopts[@]}" kafka.tools.StorageTool format \
    -t "$(java -cp "$cp" "${jopts[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null)" \
    -c "$RUN/server.properties" "${scram[@]}" >"$RUN/format.log" 2>&1 ||
    { cat "$RUN/format.log" >&2; die "formatting KRaft storage failed"; }
  log "starting Apache Kafka $VERSION (KRaft, single node) on 127.0.0.1:$PORT"
  setsid java -cp "$cp" "${jopts[@]}" kafka.Kafka "$RUN/server.properties" \
    >"$RUN/stdout.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local deadline=$((SECONDS + TIMEOUT))
  until grep -q "Kafka Server started" "$RUN/broker.log" 2>/dev/null && ready; do
    if ! pid_alive; then
      tail -n 40 "$RUN/stdout.log" "$RUN/broker.log" >&2 2>/dev/null || true
      die "broker exited during startup (logs in $RUN)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$RUN/broker.log" >&2 2>/dev/null || true
      stop_quiet; die "broker did not answer within ${TIMEOUT}s"
    fi
    sleep 0.5
  done
  write_env
  log "Apache Kafka $VERSION ready on 127.0.0.1:$PORT (pid $(cat "$RUN/pid"))"
  echo "127.0.0.1:$PORT"
}

# write_env writes $RUN/test.env, the variables the tests read.
write_env() {
  {
    echo "export ANTIDOTE_KAFKA_BROKERS=127.0.0.1:$PORT"
    if [ -f "$RUN/tls/sasl.pass" ]; then
      echo "export ANTIDOTE_KAFKA_SASL_BROKERS=127.0.0.1:$SPORT"
      echo "export ANTIDOTE_KAFKA_SASL_USERNAME=antidote"
      echo "export ANTIDOTE_KAFKA_SASL_PASSWORD=$(cat "$RUN/tls/sasl.pass")"
      echo "export ANTIDOTE_KAFKA_TLS_CA=$RUN/tls/ca.pem"
      echo "export ANTIDOTE_KAFKA_TLS_CERT=$RUN/tls/client.pem"
      echo "export ANTIDOTE_KAFKA_TLS_KEY=$RUN/tls/client.key"
    fi
  } >"$RUN/test.env"
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

# ---- three-broker mode ----------------------------------------------------

CBASE="${KAFKA_CLUSTER_PORT:-39192}"
CRUN="$CACHE/kafka-cluster-$CBASE"
CHEAP="${KAFKA_CLUSTER_HEAP:-384m}"

cport() { echo $((CBASE + $1 - 1)); }
cctl() { echo $((CBASE + 10 + $1 - 1)); }
cbootstrap() { echo "127.0.0.1:$(cport 1),127.0.0.1:$(cport 2),127.0.0.1:$(cport 3)"; }
cnode_ok() { case "${1:-}" in 1 | 2 | 3) ;; *) die "cluster: node must be 1, 2 or 3, not '${1:-}'" ;; esac; }
cpid_alive() { [ -f "$CRUN/n$1/pid" ] && kill -0 "$(cat "$CRUN/n$1/pid")" 2>/dev/null; }
cjava() { java -cp "$JARS/*" -Dlog4j2.configurationFile="$CRUN/log4j2-tools.properties" "$@"; }

cwrite_config() {
  local n=$1 d="$CRUN/n$1"
  mkdir -p "$d/data"
  cat >"$d/server.properties" <<CONF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=1@127.0.0.1:$(cctl 1),2@127.0.0.1:$(cctl 2),3@127.0.0.1:$(cctl 3)
listeners=PLAINTEXT://127.0.0.1:$(cport "$n"),CONTROLLER://127.0.0.1:$(cctl "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(cport "$n")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$d/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
auto.create.topics.enable=true
unclean.leader.election.enable=false
log.flush.interval.messages=9223372036854775807
CONF
  cat >"$d/log4j2.properties" <<CONF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $d/broker.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
CONF
}

# claunch starts node N on its (formatted) data dir, in the background.
claunch() {
  local n=$1 d="$CRUN/n$1"
  : >"$d/broker.log"
  setsid java -cp "$JARS/*" "-Xms128m" "-Xmx$CHEAP" -XX:+UseSerialGC -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$d/log4j2.properties" kafka.Kafka "$d/server.properties" \
    >"$d/stdout.log" 2>&1 </dev/null &
  echo $! >"$d/pid"
}

# cwait waits until nodes $@ log that they started, then until the cluster
# answers a metadata request on their ports.
cwait() {
  local deadline=$((SECONDS + TIMEOUT)) n
  for n in "$@"; do
    until grep -q "Kafka Server started" "$CRUN/n$n/broker.log" 2>/dev/null; do
      cpid_alive "$n" || { tail -n 40 "$CRUN/n$n/stdout.log" "$CRUN/n$n/broker.log" >&2 2>/dev/null || true; die "cluster: node $n exited during startup (logs in $CRUN/n$n)"; }
      [ $SECONDS -lt $deadline ] || { tail -n 40 "$CRUN/n$n/broker.log" >&2 2>/dev/null || true; die "cluster: node $n did not start within ${TIMEOUT}s"; }
      sleep 0.5
    done
  done
  until cjava org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$(cport "$1")" --list >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "cluster: node $1 does not answer within ${TIMEOUT}s"
    sleep 0.5
  done
}

cluster_start() {
  need_tools
  resolve
  if cpid_alive 1 && cpid_alive 2 && cpid_alive 3; then
    log "cluster already running"; cbootstrap; return 0
  fi
  cluster_stop
  local n
  for n in 1 2 3; do
    for p in "$(cport "$n")" "$(cctl "$n")"; do
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        die "port $p on 127.0.0.1 is taken by another process; set KAFKA_CLUSTER_PORT"
      fi
    done
  done
  mkdir -p "$CRUN"
  cat >"$CRUN/log4j2-tools.properties" <<CONF
status = error
rootLogger.level = ERROR
CONF
  local id; id="$(cjava kafka.tools.StorageTool random-uuid 2>/dev/null)"
  echo "$id" >"$CRUN/cluster.id"
  for n in 1 2 3; do
    cwrite_config "$n"
    cjava -Xmx256m kafka.tools.StorageTool format -t "$id" -c "$CRUN/n$n/server.properties" \
      >"$CRUN/n$n/format.log" 2>&1 &
  done
  wait || true
  for n in 1 2 3; do
    grep -q "Formatting" "$CRUN/n$n/format.log" || [ -f "$CRUN/n$n/data/meta.properties" ] ||
      { cat "$CRUN/n$n/format.log" >&2; die "cluster: formatting node $n failed"; }
  done
  log "starting Apache Kafka $VERSION (KRaft, three combined broker+controller nodes) on $(cbootstrap)"
  for n in 1 2 3; do claunch "$n"; done
  # A node that fails to start leaves none running: the others are stopped
  # (their logs stay in $CRUN), and the failure is the script's exit.
  if ! (cwait 1 2 3); then
    cluster_kill
    exit 1
  fi
  echo "export ANTIDOTE_KAFKA_BROKERS=$(cbootstrap)" >"$CRUN/test.env"
  log "cluster ready: $(cbootstrap)"
  cbootstrap
}

cluster_stop() {
  cluster_kill
  rm -rf "$CRUN"
}

# cluster_kill stops the nodes this script started (SIGTERM, then SIGKILL)
# and keeps their folders.
cluster_kill() {
  local n pid
  for n in 1 2 3; do
    [ -f "$CRUN/n$n/pid" ] || continue
    pid="$(cat "$CRUN/n$n/pid")"
    kill -0 "$pid" 2>/dev/null || continue
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for n in 1 2 3; do
    [ -f "$CRUN/n$n/pid" ] || continue
    pid="$(cat "$CRUN/n$n/pid")"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
}

cluster_signal() {
  local sig=$1 n=$2
  cnode_ok "$n"
  cpid_alive "$n" || die "cluster: node $n is not running"
  kill "-$sig" "$(cat "$CRUN/n$n/pid")"
  if [ "$sig" = KILL ]; then
    for _ in $(seq 1 50); do cpid_alive "$n" || break; sleep 0.1; done
  fi
}

cluster_restart() {
  local n=$1
  cnode_ok "$n"
  [ -f "$CRUN/n$n/server.properties" ] || die "cluster: not started (no $CRUN/n$n)"
  if cpid_alive "$n"; then
    kill -CONT "$(cat "$CRUN/n$n/pid")" 2>/dev/null || true
    kill -KILL "$(cat "$CRUN/n$n/pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do cpid_alive "$n" || break; sleep 0.1; done
  fi
  claunch "$n"
  cwait "$n"
  log "cluster: node $n restarted (pid $(cat "$CRUN/n$n/pid"))"
}

cluster_leader() {
  local topic=${1:-} part=${2:-}
  [ -n "$topic" ] && [ -n "$part" ] || die "cluster leader TOPIC PARTITION"
  local bs n
  for n in 1 2 3; do cpid_alive "$n" && bs="${bs:+$bs,}127.0.0.1:$(cport "$n")"; done
  cjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" --describe --topic "$topic" 2>/dev/null |
    awk -v p="$part" '{ for (i = 1; i < NF; i++) { if ($i == "Partition:" && $(i+1) == p) hit = 1; if (hit && $i == "Leader:") { print $(i+1); exit } } }' |
    grep . || die "cluster: no leader found for $topic/$part"
}

cluster() {
  case "${1:-}" in
    start) cluster_start ;;
    stop) cluster_stop; log "cluster stopped (ports $(cport 1)-$(cport 3))" ;;
    status)
      local n up=0
      for n in 1 2 3; do
        if cpid_alive "$n"; then
          local st; st="$(ps -o stat= -p "$(cat "$CRUN/n$n/pid")" 2>/dev/null | cut -c1)"
          if [ "$st" = T ]; then echo "node $n 127.0.0.1:$(cport "$n") hung (SIGSTOP)"; else echo "node $n 127.0.0.1:$(cport "$n") running"; fi
          up=$((up + 1))
        else
          echo "node $n 127.0.0.1:$(cport "$n") down"
        fi
      done
      [ $up -gt 0 ] || { log "cluster not running"; exit 1; }
      cbootstrap ;;
    env) cpid_alive 1 || cpid_alive 2 || cpid_alive 3 || die "cluster not running"; cat "$CRUN/test.env" ;;
    kill) cluster_signal KILL "${2:-}" ;;
    hang) cluster_signal STOP "${2:-}" ;;
    cont) cluster_signal CONT "${2:-}" ;;
    restart) cluster_restart "${2:-}" ;;
    pid) cnode_ok "${2:-}"; cpid_alive "$2" || exit 1; cat "$CRUN/n$2/pid" ;;
    leader) cluster_leader "${2:-}" "${3:-}" ;;
    *) echo "usage: $0 cluster start|stop|status|env|kill N|hang N|cont N|restart N|pid N|leader TOPIC PART" >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  cluster) shift; cluster "$@" ;;
  start) start ;;
  stop) stop_quiet; log "stopped (port $PORT)" ;;
  status)
    if pid_alive; then echo "127.0.0.1:$PORT"; else log "not running"; exit 1; fi ;;
  env)
    pid_alive || die "not running"; cat "$RUN/test.env" ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 start|stop|status|env|version | cluster ..." >&2; exit 2 ;;
esac
