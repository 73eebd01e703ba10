package consumer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestImportsLight: a module that imports only the consumer package gets
// franz-go's modules and nothing else: not the Avro library, the command's
// libraries or the lint tools, which live in modules of their own. It runs
// the go command on a tiny module that points at this repository.
func TestImportsLight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/tiny\n\ngo 1.26.0\n\nrequire github.com/antidote-kafka/antidote v0.0.0-00010101000000-000000000000\n\nreplace github.com/antidote-kafka/antidote => "+root+"\n")
	write("main.go", "package main\n\nimport _ \"github.com/antidote-kafka/antidote/consumer\"\n\nfunc main() {}\n")
	gocmd := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("mod", "tidy")
	mods := strings.Fields(gocmd("list", "-m", "-f", "{{.Path}}", "all"))
	// franz-go's own requirements come with it, whoever imports it.
	allowed := map[string]bool{"example.com/tiny": true, "github.com/antidote-kafka/antidote": true}
	for _, line := range strings.Split(gocmd("mod", "graph"), "\n") {
		from, to, ok := strings.Cut(line, " ")
		if ok && strings.HasPrefix(from, "github.com/twmb/franz-go") {
			path, _, _ := strings.Cut(to, "@")
			allowed[path] = true
		}
	}
	t.Logf("go list -m all of a module that imports consumer:\n%s", strings.Join(mods, "\n"))
	for _, m := range mods {
		if !allowed[m] && !strings.HasPrefix(m, "github.com/twmb/franz-go") {
			t.Errorf("importing consumer pulls in %s, which is neither franz-go nor one of franz-go's own requirements", m)
		}
	}
}
