package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/serde"
)

func Example() {
	c, err := consumer.New(consumer.Config[string, string]{
		Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"orders"}, Group: "billing",
		Value:   serde.String(),
		Handler: func(context.Context, *consumer.Record[string, string]) error { return nil },
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	h, err := admin.New(admin.Config{
		Consumers: map[string]admin.Consumer{"billing": c},
		Token:     "s3cret", // or ANTIDOTE_ADMIN_TOKEN; generated and logged if neither
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	// In a service: go h.ListenAndServe(ctx, "127.0.0.1:9180"), or mount h
	// on a server of your own.
	srv := httptest.NewServer(h)
	defer srv.Close()

	show := func(method, path, token string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s %s: %d %s", method, path, resp.StatusCode, body)
	}
	show("GET", "/readyz", "") // Run was not called
	show("POST", "/retry?enabled=off", "")
	show("POST", "/retry?enabled=off", "s3cret")
	show("POST", "/partitions/orders/0/skip?offset=42", "s3cret")
	fmt.Println("retry enabled:", c.RetryEnabled())
	// Output:
	// GET /readyz: 503 {"ready":false,"error":"not ready: billing: not running","consumers":{"billing":"not running"}}
	// POST /retry?enabled=off: 401 {"error":"missing bearer token: send Authorization: Bearer TOKEN, the token the admin API was started with (Config.Token or ANTIDOTE_ADMIN_TOKEN) or logged at start"}
	// POST /retry?enabled=off: 200 {"consumer":"billing","retry_enabled":false}
	// POST /partitions/orders/0/skip?offset=42: 404 {"error":"consumer: partition not assigned: orders/0"}
	// retry enabled: false
}
