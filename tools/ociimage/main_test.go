package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// goBinary builds a small Go program with the given environment and flags.
func goBinary(t *testing.T, env []string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nfunc main() { println(\"hi\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/hi\n\ngo 1.22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hi")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GOWORK=off", "GOFLAGS=", "GOOS=linux"}, env...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func digestOf(t *testing.T, dir string) string {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Manifests[0].Digest.String()
}

// TestBuildCheck: an image built from a static binary passes check, the
// same inputs give the same digest, and another commit time another one.
func TestBuildCheck(t *testing.T) {
	bin := goBinary(t, []string{"CGO_ENABLED=0"}, "-trimpath")
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	args := []string{"-binary", bin, "-revision", "abc", "-time", "1700000000"}
	if err := build(append(args, "-out", a, "-tar", filepath.Join(dir, "a.tar"))); err != nil {
		t.Fatal(err)
	}
	if err := check([]string{"-layout", a}); err != nil {
		t.Fatal(err)
	}
	if err := check([]string{"-layout", a, "-version", "v9.9.9"}); err == nil || !strings.Contains(err.Error(), "v9.9.9") {
		t.Errorf("check -version v9.9.9 of a (devel) image: %v; want a version mismatch", err)
	}
	if err := build(append(args, "-out", b)); err != nil {
		t.Fatal(err)
	}
	if da, db := digestOf(t, a), digestOf(t, b); da != db {
		t.Errorf("same binary, same time: digests %s and %s", da, db)
	}
	if err := build([]string{"-binary", bin, "-revision", "abc", "-time", "1700000001", "-out", c}); err != nil {
		t.Fatal(err)
	}
	if digestOf(t, a) == digestOf(t, c) {
		t.Error("another time gave the same digest")
	}
	if fi, err := os.Stat(filepath.Join(dir, "a.tar")); err != nil || fi.Size() == 0 {
		t.Errorf("docker-archive: %v", err)
	}
}

// TestBuildRefuses: a binary built without -trimpath or with cgo is not
// put in the image.
func TestBuildRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   []string
		flags []string
		want  string
	}{
		{"no trimpath", []string{"CGO_ENABLED=0"}, nil, "-trimpath"},
		{"cgo", []string{"CGO_ENABLED=1"}, []string{"-trimpath"}, "CGO_ENABLED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "cgo" {
				if _, err := exec.LookPath("gcc"); err != nil {
					t.Skip("no C compiler")
				}
			}
			bin := goBinary(t, c.env, c.flags...)
			err := build([]string{"-binary", bin, "-revision", "abc", "-out", filepath.Join(t.TempDir(), "o")})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("build: %v; want an error naming %s", err, c.want)
			}
		})
	}
}

func TestTagOf(t *testing.T) {
	for in, want := range map[string]string{
		"v0.1.0":                             "v0.1.0",
		"(devel)":                            "devel",
		"v0.2.0-rc.1+dirty":                  "v0.2.0-rc.1-dirty",
		"v0.0.0-20261202163732-bf59d91ce2d1": "v0.0.0-20261202163732-bf59d91ce2d1",
		"":                                   "latest",
	} {
		if got := tagOf(in); got != want {
			t.Errorf("tagOf(%q) = %q; want %q", in, got, want)
		}
	}
}
