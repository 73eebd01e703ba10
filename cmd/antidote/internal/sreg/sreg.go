// Package sreg is the in-process schema registry of antidote demo: the
// little of the Confluent Schema Registry API that the demo's producer and
// consumer use (register a schema under a subject, fetch a schema by id or
// by subject and version), on a loopback listener it can stop and restart
// to play an outage.
//
// It is not a test helper and imports no testing package, so that the
// antidote binary does not link them. Tests of the serde packages use
// internal/srtest at the repository root, which is a complete fake
// registry with fault injection.
package sreg

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Registry is an in-process schema registry. Its methods are safe for
// concurrent use.
type Registry struct {
	addr string
	mux  *http.ServeMux

	mu       sync.Mutex
	srv      *http.Server
	byID     map[int]sr.Schema
	subjects map[string][]int // subject -> the id of each version, version 1 first
}

// Start starts a registry on a free loopback port. The caller stops it
// with [Registry.Stop].
func Start() (*Registry, error) {
	r := &Registry{byID: map[int]sr.Schema{}, subjects: map[string][]int{}, mux: http.NewServeMux()}
	r.mux.HandleFunc("POST /subjects/{subject}/versions", r.register)
	r.mux.HandleFunc("GET /schemas/ids/{id}", r.schemaByID)
	r.mux.HandleFunc("GET /subjects/{subject}/versions/{version}", r.schemaByVersion)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("schema registry: listen: %w", err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	return r, nil
}

// URL returns the registry's base URL.
func (r *Registry) URL() string { return "http://" + r.addr }

// Stop closes the listener and every connection: clients get "connection
// refused" until [Registry.Restart]. Stopping twice is harmless.
func (r *Registry) Stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Restart listens again on the same address, keeping the registered
// schemas, or returns why it cannot.
func (r *Registry) Restart() error {
	var ln net.Listener
	var err error
	for range 50 { // the port may linger briefly after Stop
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("schema registry: re-listen on %s: %w", r.addr, err)
	}
	r.serve(ln)
	return nil
}

func (r *Registry) serve(ln net.Listener) {
	srv := &http.Server{Handler: r.mux, ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// register is POST /subjects/{subject}/versions: the id of the schema,
// registered as the subject's next version unless the subject has it.
func (r *Registry) register(w http.ResponseWriter, req *http.Request) {
	var s sr.Schema
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&s); err != nil || s.Schema == "" {
		fail(w, http.StatusUnprocessableEntity, sr.ErrInvalidSchema.Code, "invalid schema")
		return
	}
	subject := req.PathValue("subject")
	r.mu.Lock()
	defer r.mu.Unlock()
	id := 0
	for i, have := range r.byID {
		if same(have, s) {
			id = i
			break
		}
	}
	if id == 0 {
		id = len(r.byID) + 1
		r.byID[id] = sr.Schema{Schema: s.Schema, Type: s.Type, References: s.References}
	}
	for _, v := range r.subjects[subject] {
		if v == id {
			respond(w, http.StatusOK, map[string]int{"id": id})
			return
		}
	}
	r.subjects[subject] = append(r.subjects[subject], id)
	respond(w, http.StatusOK, map[string]int{"id": id})
}

// schemaByID is GET /schemas/ids/{id}.
func (r *Registry) schemaByID(w http.ResponseWriter, req *http.Request) {
	id, err := strconv.Atoi(req.PathValue("id"))
	r.mu.Lock()
	s, ok := r.byID[id]
	r.mu.Unlock()
	if err != nil || !ok {
		fail(w, http.StatusNotFound, sr.ErrSchemaNotFound.Code, "schema not found")
		return
	}
	respond(w, http.StatusOK, s)
}

// schemaByVersion is GET /subjects/{subject}/versions/{version}, the
// version a number or "latest".
func (r *Registry) schemaByVersion(w http.ResponseWriter, req *http.Request) {
	subject := req.PathValue("subject")
	r.mu.Lock()
	defer r.mu.Unlock()
	ids, ok := r.subjects[subject]
	if !ok {
		fail(w, http.StatusNotFound, sr.ErrSubjectNotFound.Code, fmt.Sprintf("subject %q not found", subject))
		return
	}
	v := len(ids)
	if s := req.PathValue("version"); s != "latest" && s != "-1" {
		var err error
		if v, err = strconv.Atoi(s); err != nil || v < 1 || v > len(ids) {
			fail(w, http.StatusNotFound, sr.ErrVersionNotFound.Code, fmt.Sprintf("version %s not found for %q", s, subject))
			return
		}
	}
	id := ids[v-1]
	respond(w, http.StatusOK, sr.SubjectSchema{Subject: subject, Version: v, ID: id, Schema: r.byID[id]})
}

// same reports whether a and b are the same schema.
func same(a, b sr.Schema) bool {
	if a.Schema != b.Schema || a.Type != b.Type || len(a.References) != len(b.References) {
		return false
	}
	for i := range a.References {
		if a.References[i] != b.References[i] {
			return false
		}
	}
	return true
}

func respond(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func fail(w http.ResponseWriter, status, code int, msg string) {
	respond(w, status, map[string]any{"error_code": code, "message": msg})
}
