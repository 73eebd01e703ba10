// Package maven builds the Maven projects of the bench's peers, the Java
// consumers that a bench runs beside Antidote on the same data.
package maven

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build packages the Maven project in dir (its pom copies the runtime
// dependencies to target/lib) and returns the classpath that runs it. It
// returns "" and no error when dir is empty or java or mvn is not on the
// PATH: the peer is then not run. what names the peer on standard error.
func Build(dir, what string) (string, error) {
	if dir == "" {
		return "", nil
	}
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", nil
		}
	}
	fmt.Fprintf(os.Stderr, "building the %s side with Maven (the first build downloads it from Maven Central)\n", what)
	cmd := exec.Command("mvn", "-B", "-q", "-f", filepath.Join(dir, "pom.xml"), "package", "-DskipTests")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", dir, err, out)
	}
	target := filepath.Join(dir, "target")
	return filepath.Join(target, "classes") + string(os.PathListSeparator) + filepath.Join(target, "lib", "*"), nil
}
