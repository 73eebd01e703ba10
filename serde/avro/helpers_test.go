package avro_test

import (
	"log/slog"
	"testing"

	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// Order v1 is what producers write; v2 (the reader) adds a field with a
// default.
const (
	orderV1 = `{"type":"record","name":"Order","namespace":"com.acme","fields":[
		{"name":"id","type":"string"},
		{"name":"amount","type":"long"},
		{"name":"note","type":"string"}]}`
	orderV2 = `{"type":"record","name":"Order","namespace":"com.acme","fields":[
		{"name":"id","type":"string"},
		{"name":"amount","type":"long"},
		{"name":"note","type":"string"},
		{"name":"currency","type":"string","default":"EUR"}]}`
	refundSchema = `{"type":"record","name":"Refund","namespace":"com.acme","fields":[
		{"name":"order_id","type":"string"},
		{"name":"amount","type":"long"}]}`
	auditSchema = `{"type":"record","name":"Audit","namespace":"com.acme","fields":[
		{"name":"who","type":"string"}]}`
)

type Order struct {
	ID       string `avro:"id"`
	Amount   int64  `avro:"amount"`
	Note     string `avro:"note"`
	Currency string `avro:"currency"`
}

type orderV1T struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
	Note   string `avro:"note"`
}

type Refund struct {
	OrderID string `avro:"order_id"`
	Amount  int64  `avro:"amount"`
}

type audit struct {
	Who string `avro:"who"`
}

// quietLogger drops the logs of the code under test unless
// ANTIDOTE_TEST_LOGS=1 (srtest.Logger).
func quietLogger() *slog.Logger { return srtest.Logger() }

// newRegistry returns a client of reg with quiet logs.
func newRegistry(t testing.TB, reg *srtest.Registry, opts ...avro.Opt) *avro.Registry {
	t.Helper()
	r, err := avro.NewRegistry(reg.URL(), append([]avro.Opt{avro.Logger(quietLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// subject returns a subject name unique to this run, so that tests can
// share a real registry.
func subject(prefix string) string { return kafkatest.UniqueName(prefix) + "-value" }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
