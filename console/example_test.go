package console_test

import (
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/console"
)

func ExampleNew() {
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")},
		Token:      "s3cret",
	})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	// Serve h on loopback: http.ListenAndServe("127.0.0.1:9190", h). Every
	// page but the login page needs the session cookie or the token.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/topics/orders.dlq", nil))
	fmt.Println(w.Code, w.Header().Get("Location"))
	fmt.Println(strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'"))
	// Output:
	// 303 /login?next=%2Ftopics%2Forders.dlq
	// true
}

func ExampleVisible() {
	s, _ := console.Visible([]byte("\x1b[31mred\x1b[0m \xff\u202eevil"), 0)
	fmt.Println(s)
	s, cut := console.Visible([]byte("a long value"), 6)
	fmt.Println(s, cut)
	// Output:
	// \x1b[31mred\x1b[0m \xff\u202eevil
	// a long true
}
