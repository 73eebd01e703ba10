// Command ociimage builds the OCI image of antidote from a static binary, with
// no base image and no container daemon, and checks an image it built
// (scripts/image.sh, scripts/imagecheck.sh).
//
//	go run ./tools/ociimage build -binary BIN -out DIR [-tar FILE] [-revision REV] [-time UNIX] ...
//	go run ./tools/ociimage check -layout DIR [-version VERSION]
//
// build writes an OCI image layout directory (DIR, one image, tagged in its
// index) and, with -tar, the same image as a docker-archive tarball that
// `podman load` and `docker load` read. The image has two layers: the base
// (/etc/passwd and /etc/group with the user nonroot, uid and gid 65532, the
// CA certificates, an empty /tmp) and the binary at /antidote. It runs as
// 65532:65532 with /antidote as its entrypoint. Every file belongs to root
// with a fixed time (-time, the commit's), so the same binary and
// certificates give the same layers, digests included. The binary must be a
// static Go binary built with CGO_ENABLED=0 and -trimpath; its build
// information gives the version label, the architecture and the tag.
//
// check reads the layout back and fails unless the config runs /antidote as
// uid 65532, the labels are set (the version one equal to the binary's module
// version, and to -version when given), /etc/passwd names uid 65532, the
// certificates parse, every file belongs to root, and the binary is static,
// built with CGO_ENABLED=0 and -trimpath. It prints the image's size.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which check verifies.
const (
	binaryPath = "/antidote"
	certsPath  = "/etc/ssl/certs/ca-certificates.crt"
	user       = "65532:65532"
	uid        = 65532

	labelSource   = "org.opencontainers.image.source"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelTitle    = "org.opencontainers.image.title"
	labelDesc     = "org.opencontainers.image.description"
	labelCreated  = "org.opencontainers.image.created"
	labelLicenses = "org.opencontainers.image.licenses"
	refName       = "org.opencontainers.image.ref.name"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ociimage build -binary BIN -out DIR [-tar FILE] [flags]\n       ociimage check -layout DIR [-version VERSION]")
	os.Exit(2)
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	bin := fs.String("binary", "", "the static antidote binary (required)")
	out := fs.String("out", "", "the OCI image layout directory to write, replaced if present (required)")
	tarFile := fs.String("tar", "", "also write the image as a docker-archive tarball here")
	repo := fs.String("repository", "antidote", "the image's repository name, for its tag")
	certs := fs.String("certs", certsPath, "the CA certificates (PEM) to put at "+certsPath)
	source := fs.String("source", "https://github.com/antidote-kafka/antidote", "label "+labelSource)
	revision := fs.String("revision", "", "label "+labelRevision+": the commit the binary was built from (required)")
	licenses := fs.String("licenses", "", "label "+labelLicenses+" (SPDX expression); none when empty")
	epoch := fs.Int64("time", 0, "the creation time and every file's time, in Unix seconds (the commit's)")
	_ = fs.Parse(args)
	if *bin == "" || *out == "" || *revision == "" {
		return errors.New("build: -binary, -out and -revision are required")
	}
	bi, err := staticGo(*bin)
	if err != nil {
		return err
	}
	binData, err := os.ReadFile(*bin)
	if err != nil {
		return err
	}
	pem, err := os.ReadFile(*certs)
	if err != nil {
		return err
	}
	if n := countCerts(pem); n == 0 {
		return fmt.Errorf("%s: no certificate", *certs)
	}
	created := time.Unix(*epoch, 0).UTC()
	tag := tagOf(bi.Main.Version)

	base, err := layer(created, []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(certsPath, "/"), mode: 0o644, data: pem},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: uid},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
	if err != nil {
		return err
	}
	app, err := layer(created, []file{{name: strings.TrimPrefix(binaryPath, "/"), mode: 0o755, data: binData}})
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "ociimage: /etc/passwd, /etc/group, CA certificates, /tmp"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "ociimage: " + binaryPath + " " + bi.Main.Version}},
	)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = "linux", setting(bi, "GOARCH"), variant(bi)
	cf.Created = v1.Time{Time: created}
	labels := map[string]string{
		labelSource:   *source,
		labelVersion:  bi.Main.Version,
		labelRevision: *revision,
		labelTitle:    "antidote",
		labelDesc:     "Poison-pill-proof Kafka consumers: antidote run, dead-letter tooling, demo",
		labelCreated:  created.Format(time.RFC3339),
	}
	if *licenses != "" {
		labels[labelLicenses] = *licenses
	}
	cf.Config = v1.Config{
		User:       user,
		Entrypoint: []string{binaryPath},
		WorkingDir: "/home/nonroot",
		Env:        []string{"PATH=/", "HOME=/home/nonroot", "SSL_CERT_FILE=" + certsPath},
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	ref := *repo + ":" + tag
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	p, err := layout.Write(*out, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refName: tag})); err != nil {
		return err
	}
	if *tarFile != "" {
		r, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(*tarFile, r, img); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (%s, %s)\n", ref, digest, *out, cmpOr(*tarFile, "no tarball"))
	return nil
}

// staticGo returns the build information of a Go binary built static with
// CGO_ENABLED=0 and -trimpath, or says what it is not.
func staticGo(bin string) (*debug.BuildInfo, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: not a Go binary: %w", bin, err)
	}
	if setting(bi, "CGO_ENABLED") != "0" {
		return nil, fmt.Errorf("%s: built with CGO_ENABLED=%q; want 0 (a static binary)", bin, setting(bi, "CGO_ENABLED"))
	}
	if setting(bi, "-trimpath") != "true" {
		return nil, fmt.Errorf("%s: not built with -trimpath", bin)
	}
	if setting(bi, "GOOS") != "linux" {
		return nil, fmt.Errorf("%s: built for GOOS=%s; want linux", bin, setting(bi, "GOOS"))
	}
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return nil, fmt.Errorf("%s: dynamically linked", bin)
		}
	}
	return bi, nil
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// variant is the OCI platform variant of the binary's architecture.
func variant(bi *debug.BuildInfo) string {
	if setting(bi, "GOARCH") == "arm" {
		return "v" + setting(bi, "GOARM")
	}
	return ""
}

// tagOf makes a module version a valid tag: "+" (semantic-version build
// metadata) becomes "-"; "(devel)" becomes "devel".
func tagOf(version string) string {
	t := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r == '+':
			return '-'
		}
		return -1
	}, version)
	t = strings.TrimLeft(t, ".-")
	if t == "" {
		return "latest"
	}
	return t[:min(len(t), 128)]
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type file struct {
	name string
	mode int64
	data []byte
	dir  bool
	uid  int
}

// layer makes an uncompressed tar of files, in order, owned by root unless
// set, with time t, and turns it into a gzip layer.
func layer(t time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: t, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func countCerts(pem []byte) int {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return 0
	}
	return bytes.Count(pem, []byte("-----BEGIN CERTIFICATE-----"))
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	dir := fs.String("layout", "", "the OCI image layout directory (required)")
	want := fs.String("version", "", "the version the image must carry (optional)")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("check: -layout is required")
	}
	idx, err := layout.ImageIndexFromPath(*dir)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) != 1 {
		return fmt.Errorf("%s: %d images; want 1", *dir, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return err
	}
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	c := cf.Config
	if c.User != user {
		bad("user %q; want %q", c.User, user)
	}
	if !slices.Equal(c.Entrypoint, []string{binaryPath}) {
		bad("entrypoint %q; want [%s]", c.Entrypoint, binaryPath)
	}
	for _, l := range []string{labelSource, labelVersion, labelRevision, labelTitle, labelCreated} {
		if c.Labels[l] == "" {
			bad("label %s missing", l)
		}
	}
	version := c.Labels[labelVersion]
	if *want != "" && version != *want {
		bad("label %s %q; want %q", labelVersion, version, *want)
	}
	if tag := im.Manifests[0].Annotations[refName]; tag != tagOf(version) {
		bad("tag %q in the index; want %q", tag, tagOf(version))
	}

	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var passwd, certs, binData []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		p := "/" + strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")
		if h.Uid != 0 && p != "/home/nonroot" {
			bad("%s belongs to uid %d; want 0 (root)", p, h.Uid)
		}
		var dst *[]byte
		switch p {
		case "/etc/passwd":
			dst = &passwd
		case certsPath:
			dst = &certs
		case binaryPath:
			dst = &binData
			if h.Mode&0o111 == 0 || h.Mode&0o022 != 0 {
				bad("%s has mode %o; want executable, writable by its owner only", p, h.Mode)
			}
		default:
			continue
		}
		if *dst, err = io.ReadAll(tr); err != nil {
			return err
		}
	}
	if !hasUser(passwd, uid) {
		bad("/etc/passwd has no entry for uid %d", uid)
	}
	if n := countCerts(certs); n == 0 {
		bad("%s: no certificate", certsPath)
	} else {
		fmt.Printf("%s: %d certificates\n", certsPath, n)
	}
	if binData == nil {
		bad("%s missing", binaryPath)
	} else {
		tmp, err := os.CreateTemp("", "antidote-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		if _, err := tmp.Write(binData); err != nil {
			return err
		}
		tmp.Close()
		bi, err := staticGo(tmp.Name())
		if err != nil {
			bad("%v", err)
		} else if bi.Main.Version != version {
			bad("the binary's module version is %q; the label says %q", bi.Main.Version, version)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s:\n  %s", *dir, strings.Join(problems, "\n  "))
	}
	compressed, uncompressed, err := sizes(img)
	if err != nil {
		return err
	}
	digest, _ := img.Digest()
	fmt.Printf("ok: %s %s, user %s, entrypoint %v, version %s, revision %s\n", tagOf(version), digest, c.User, c.Entrypoint, version, c.Labels[labelRevision])
	fmt.Printf("size: %s compressed (layers and config), %s uncompressed\n", mib(compressed), mib(uncompressed))
	return nil
}

func hasUser(passwd []byte, id int) bool {
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[2] == strconv.Itoa(id) {
			return true
		}
	}
	return false
}

// sizes returns what a registry stores (the compressed layers and the
// config) and what the layers unpack to.
func sizes(img v1.Image) (compressed, uncompressed int64, err error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, 0, err
	}
	compressed = m.Config.Size
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, err
	}
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		compressed += s
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, 0, err
		}
		uncompressed += n
	}
	return compressed, uncompressed, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n) }
