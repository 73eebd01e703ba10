// Package integration holds the tests of package deadletter that need a
// Kafka cluster: Scan, Redrive and the exactly-once redrive under a kill.
// They run on kfake, and on a real broker with ANTIDOTE_KAFKA_BROKERS (see
// internal/kafkatest).
//
// They live apart from deadletter's own tests so that deadletter's test
// binary does not link franz-go's client: fuzzing instruments every linked
// package for coverage, and the client's code made each fuzz input cost
// about four times the counters (77,000 against 16,600), which held
// FuzzParse to a few thousand inputs a second.
package integration
