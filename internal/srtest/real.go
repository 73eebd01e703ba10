package srtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// RepoRoot returns the root of the repository (the folder with go.work).
func RepoRoot(t testing.TB) string {
	t.Helper()
	// This file is internal/srtest/real.go of the repository: the root is
	// two folders up. (A go.mod is no landmark: the formats are modules of
	// their own.)
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("srtest: cannot tell where the repository is")
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("srtest: %s is not the repository root: %v", root, err)
	}
	return root
}

// RequireKill skips the test unless the registry can be killed and
// restarted for real: a real registry on loopback started by
// scripts/registry.sh, whose storage survives a kill -9. With CI=true a
// missing script fails the test instead.
func (r *Registry) RequireKill(t testing.TB) {
	t.Helper()
	if !r.real {
		t.Skip("srtest: killing a process needs a real registry (" + EnvURL + ", scripts/registry.sh)")
	}
	if _, err := r.port(); err != nil {
		t.Skipf("srtest: %v", err)
	}
	if _, err := os.Stat(r.script(t)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("srtest: CI=true and %v", err)
		}
		t.Skipf("srtest: %v", err)
	}
}

// port returns the port of a loopback registry URL.
func (r *Registry) port() (string, error) {
	u, err := url.Parse(r.url)
	if err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") || u.Port() == "" {
		return "", fmt.Errorf("registry %s is not on loopback with a port: not one scripts/registry.sh started", r.url)
	}
	return u.Port(), nil
}

func (r *Registry) script(t testing.TB) string {
	return filepath.Join(RepoRoot(t), "scripts", "registry.sh")
}

// ctl runs scripts/registry.sh verb for this registry's port.
func (r *Registry) ctl(t testing.TB, verb string) string {
	t.Helper()
	port, err := r.port()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.script(t), verb)
	cmd.Env = append(os.Environ(), "REGISTRY_PORT="+port)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("srtest: registry.sh %s: %v\n%s", verb, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// Kill kills the registry: a real one with SIGKILL (its storage is kept,
// as after a crash), the in-process one as [Registry.Stop] does.
func (r *Registry) Kill(t testing.TB) {
	t.Helper()
	if !r.real {
		r.Stop()
		return
	}
	r.ctl(t, "kill")
}

// Revive starts a killed registry again and returns once it answers: a
// real one with scripts/registry.sh start (which waits until it is ready),
// the in-process one as [Registry.Start] does.
func (r *Registry) Revive(t testing.TB) {
	t.Helper()
	if !r.real {
		r.Start(t)
		return
	}
	r.ctl(t, "start")
}

// Answers reports whether the registry answers a request of its
// Confluent-compatible API now, with its own client (not counted by any
// [CountingClient]).
func (r *Registry) Answers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/subjects", nil)
	if err != nil {
		return false
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

var errNoPython = errors.New("no Python with confluent-kafka: set " + EnvPython + " (scripts/python/venv.sh prints one)")
