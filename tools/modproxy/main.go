// Command modproxy packs modules of this repository into a file-based module
// proxy, as if each had been tagged at one version, so that `go install` and
// `go get` can be tried with GOWORK=off and GOPROXY=file:///DIR before a tag
// exists (scripts/installcheck.sh).
//
//	go run ./tools/modproxy -version v0.1.0 -out DIR . serde/avro metrics/prom ...
//
// Each argument is a module directory. Its files are those git would commit
// (tracked or untracked, not ignored; uncommitted edits included), and its
// zip is built by golang.org/x/mod/zip, which leaves out nested modules just as
// the module proxy does for a tag. In the packed go.mod, every requirement on
// one of the packed modules is set to -version, and replace directives are
// dropped (a user's build ignores them anyway); the working tree is not
// changed. DIR gets the proxy protocol's files for each module:
// <escaped path>/@v/list, VERSION.info, VERSION.mod and VERSION.zip.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	version := flag.String("version", "", "the version to pack every module at, e.g. v0.1.0 (required)")
	out := flag.String("out", "", "the proxy directory to write (required); created if missing")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: modproxy -version VERSION -out DIR MODULE_DIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*version, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// mod is one module directory and its go.mod.
type mod struct {
	dir  string
	file *modfile.File
}

func run(version, out string, dirs []string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-version %q: want a canonical semantic version such as v0.1.0", version)
	}
	if out == "" || len(dirs) == 0 {
		return errors.New("-out and at least one module directory are required")
	}
	mods := make([]mod, 0, len(dirs))
	packed := make(map[string]bool)
	for _, dir := range dirs {
		name := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s: no module line", name)
		}
		if err := module.CheckPath(f.Module.Mod.Path); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		mods = append(mods, mod{dir: dir, file: f})
		packed[f.Module.Mod.Path] = true
	}
	for _, m := range mods {
		if err := pack(m, version, packed, out); err != nil {
			return fmt.Errorf("%s: %w", m.dir, err)
		}
	}
	return nil
}

// pack writes module m at version into the proxy directory out.
func pack(m mod, version string, packed map[string]bool, out string) error {
	mv := module.Version{Path: m.file.Module.Mod.Path, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return err // a /vN suffix that does not match the version
	}
	for _, r := range m.file.Require {
		if packed[r.Mod.Path] {
			if err := m.file.AddRequire(r.Mod.Path, version); err != nil {
				return err
			}
		}
	}
	for _, r := range append([]*modfile.Replace(nil), m.file.Replace...) {
		if err := m.file.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return err
		}
	}
	m.file.Cleanup()
	gomod, err := m.file.Format()
	if err != nil {
		return err
	}
	names, err := gitFiles(m.dir)
	if err != nil {
		return err
	}
	files := make([]zip.File, 0, len(names))
	for _, name := range names {
		if name == "go.mod" {
			files = append(files, memFile{name: name, data: gomod})
			continue
		}
		fi, err := os.Lstat(filepath.Join(m.dir, filepath.FromSlash(name)))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			return err
		}
		files = append(files, dirFile{root: m.dir, name: name, info: fi})
	}
	esc, err := module.EscapePath(mv.Path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	var zbuf bytes.Buffer
	if err := zip.Create(&zbuf, mv, files); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		version + ".zip":  zbuf.Bytes(),
		version + ".mod":  gomod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s\t%d files\t%d bytes\n", mv.Path, version, len(files), zbuf.Len())
	return nil
}

// gitFiles lists the files under dir that git would commit, slash-separated
// and relative to dir: tracked files and untracked ones that are not ignored.
func gitFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	seen := make(map[string]bool)
	var names []string
	for _, n := range strings.Split(string(outb), "\x00") {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		names = append(names, path.Clean(n))
	}
	return names, nil
}

// dirFile is a file of the module directory, for zip.Create.
type dirFile struct {
	root, name string
	info       os.FileInfo
}

func (f dirFile) Path() string                 { return f.name }
func (f dirFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f dirFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.name)) }

// memFile is a file whose content is held in memory: the rewritten go.mod.
type memFile struct {
	name string
	data []byte
}

func (f memFile) Path() string                 { return f.name }
func (f memFile) Lstat() (os.FileInfo, error)  { return memInfo(f), nil }
func (f memFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

// memInfo is the os.FileInfo of a memFile.
type memInfo memFile

func (i memInfo) Name() string       { return path.Base(i.name) }
func (i memInfo) Size() int64        { return int64(len(i.data)) }
func (i memInfo) Mode() os.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
