package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// testCode reports whether a package in the binary's dependencies is test
// code: the testing packages, net/http/httptest, or a test kit.
func testCode(pkg string) bool {
	return pkg == "testing" || strings.HasPrefix(pkg, "testing/") || pkg == "net/http/httptest" ||
		strings.HasSuffix(pkg, "/internal/clitest") || strings.HasSuffix(pkg, "/internal/kafkatest") || strings.HasSuffix(pkg, "/internal/srtest")
}

// TestBinaryLinksNoTestCode: the antidote binary links no test code. A
// non-test file that imports a test kit or the testing package (a helper
// moved out of a _test.go file, say) would put it, its flags and its
// dependencies into every user's binary.
func TestBinaryLinksNoTestCode(t *testing.T) {
	// go test puts its own GOROOT/bin first in PATH: this is the go
	// command that runs the test.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "list", "-deps", ".").Output()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps .: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "github.com/antidote-kafka/antidote/cmd/antidote" {
		t.Fatalf("go list -deps . did not list the command last: %q", out)
	}
	for _, p := range deps {
		if testCode(p) {
			t.Errorf("the antidote binary links %s: a file that is not a test imports it (go list -deps -f '{{.ImportPath}}: {{.Imports}}' . | grep %s shows which)", p, p)
		}
	}
}
