package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Reading the file of antidote run: goccy/go-yaml parses it into a syntax
// tree (every node knows its line), a walk over the tree beside the Go type
// of the configuration refuses unknown keys (with a "did you mean"),
// substitutes ${VAR} and ${file:path} in scalars and records where each key
// is, then the decoder fills the structs. Every error names the file, the
// line and the key.

// fileError is an error at a place of the config file.
type fileError struct {
	file string
	line int
	key  string // the key's path, "pipelines[0].sink.http.url"; "" for the whole file
	msg  string
}

func (e *fileError) Error() string {
	var b strings.Builder
	b.WriteString(e.file)
	if e.line > 0 {
		b.WriteString(":" + strconv.Itoa(e.line))
	}
	b.WriteString(": ")
	if e.key != "" {
		b.WriteString(e.key + ": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

// yamlDoc is a parsed config file: where its keys are, and which values
// came from a substitution.
type yamlDoc struct {
	file     string
	dir      string         // relative ${file:} paths are relative to it
	lines    map[string]int // key path → line
	byLine   map[int]string // line → the key path that starts there
	getenv   func(string) (string, bool)
	readFile func(string) ([]byte, error)
}

// errAt returns an error at the key path (the nearest ancestor that the file
// has, for a key that is missing).
func (d *yamlDoc) errAt(path, format string, args ...any) error {
	line := 0
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := d.lines[p]; ok {
			line = l
			break
		}
	}
	return &fileError{file: d.file, line: line, key: path, msg: fmt.Sprintf(format, args...)}
}

// has reports whether the file sets the key path.
func (d *yamlDoc) has(path string) bool {
	_, ok := d.lines[path]
	return ok
}

// parentPath is the path of the key that holds path's key.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// newYAMLDoc returns the reader of file, with the process's environment and
// files.
func newYAMLDoc(file string) *yamlDoc {
	return &yamlDoc{
		file: file, dir: filepath.Dir(file),
		lines: map[string]int{}, byLine: map[int]string{},
		getenv: os.LookupEnv, readFile: os.ReadFile,
	}
}

// decode parses b (the contents of the file) into v, a pointer to a struct
// whose fields have yaml tags.
func (d *yamlDoc) decode(b []byte, v any) error {
	f, err := parser.ParseBytes(b, 0)
	if err != nil {
		return d.yamlErr(err)
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		if len(f.Docs) > 1 {
			return &fileError{file: d.file, msg: "holds several YAML documents: give one"}
		}
		return &fileError{file: d.file, msg: "is empty"}
	}
	body, err := d.walk(f.Docs[0].Body, reflect.TypeOf(v).Elem(), "")
	if err != nil {
		return err
	}
	if err := yaml.NodeToValue(body, v, yaml.Strict()); err != nil {
		return d.yamlErr(err)
	}
	return nil
}

// yamlErr turns an error of the YAML library into a fileError.
func (d *yamlDoc) yamlErr(err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		line, key := 0, ""
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			line = tk.Position.Line
			key = d.byLine[line]
		}
		return &fileError{file: d.file, line: line, key: key, msg: cli.OneLine(errors.New(ye.GetMessage()))}
	}
	return &fileError{file: d.file, msg: cli.OneLine(err)}
}

var durationType = reflect.TypeOf(time.Duration(0))

// walk checks node against the Go type t at path, substitutes scalars and
// returns the node to decode (a new one where a substitution changed a
// scalar's type).
func (d *yamlDoc) walk(node ast.Node, t reflect.Type, path string) (ast.Node, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n := node.(type) {
	case *ast.AnchorNode:
		v, err := d.walk(n.Value, t, path)
		n.Value = v
		return n, err
	case *ast.AliasNode, *ast.TagNode, *ast.NullNode:
		return node, nil
	case *ast.MappingNode:
		for _, mv := range n.Values {
			if err := d.walkPair(mv, t, path); err != nil {
				return nil, err
			}
		}
		return n, nil
	case *ast.MappingValueNode:
		return n, d.walkPair(n, t, path)
	case *ast.SequenceNode:
		if t.Kind() != reflect.Slice {
			return n, nil // the decoder reports the mismatch
		}
		for i, item := range n.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			if tk := item.GetToken(); tk != nil && tk.Position != nil {
				d.lines[p] = tk.Position.Line
				if _, ok := d.byLine[tk.Position.Line]; !ok {
					d.byLine[tk.Position.Line] = p
				}
			}
			v, err := d.walk(item, t.Elem(), p)
			if err != nil {
				return nil, err
			}
			n.Values[i] = v
		}
		return n, nil
	case *ast.StringNode:
		out, err := d.scalar(n, n.Value, t, path)
		if err == nil && t == durationType {
			if sn, ok := out.(*ast.StringNode); ok {
				if _, perr := time.ParseDuration(sn.Value); perr != nil {
					return nil, d.errAt(path, "%q is not a duration (for example 500ms, 10s, 1m30s)", cli.Safe(sn.Value))
				}
			}
		}
		return out, err
	case *ast.LiteralNode:
		if n.Value != nil {
			return d.scalar(n, n.Value.Value, t, path)
		}
	}
	return node, nil
}

// walkPair checks one key of a mapping.
func (d *yamlDoc) walkPair(mv *ast.MappingValueNode, t reflect.Type, path string) error {
	key := mv.Key.String()
	if s, ok := mv.Key.(*ast.StringNode); ok {
		key = s.Value
	}
	if key == "<<" { // a merge key: its mapping is checked where it is defined
		return nil
	}
	p := key
	if path != "" {
		p = path + "." + key
	}
	line := 0
	if tk := mv.Key.GetToken(); tk != nil && tk.Position != nil {
		line = tk.Position.Line
	}
	var elem reflect.Type
	switch t.Kind() {
	case reflect.Struct:
		names := yamlNames(t)
		f, ok := names[key]
		if !ok {
			msg := "unknown key"
			if m := didYouMean(key, keysOf(names)); m != "" {
				msg += m
			} else {
				msg += " (the keys here are: " + strings.Join(keysOf(names), ", ") + ")"
			}
			return &fileError{file: d.file, line: line, key: p, msg: msg}
		}
		elem = f.Type
	case reflect.Map:
		elem = t.Elem()
		p = path + "." + key
		if path == "" {
			p = key
		}
	default:
		return nil // the decoder reports a mapping where a scalar is wanted
	}
	d.lines[p] = line
	if _, ok := d.byLine[line]; !ok || len(p) > len(d.byLine[line]) {
		d.byLine[line] = p
	}
	v, err := d.walk(mv.Value, elem, p)
	if err != nil {
		return err
	}
	mv.Value = v
	return nil
}

// scalar substitutes ${...} in a scalar. A substituted value for a field
// that is no string is parsed as YAML again (a number, a boolean).
func (d *yamlDoc) scalar(n ast.Node, s string, t reflect.Type, path string) (ast.Node, error) {
	if !strings.Contains(s, "$") {
		return n, nil
	}
	v, err := d.substitute(s)
	if err != nil {
		return nil, d.errAt(path, "%v", err)
	}
	if v == s {
		return n, nil
	}
	// The decoder reads numbers from a string node; the value is checked
	// here, so that a bad one is reported at its key.
	sn, isString := n.(*ast.StringNode)
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t == durationType {
			break
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
			return nil, d.errAt(path, "the substituted value %q is not an integer", cli.Safe(v))
		}
	case reflect.Float32, reflect.Float64:
		if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return nil, d.errAt(path, "the substituted value %q is not a number", cli.Safe(v))
		}
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil || !isString {
			return nil, d.errAt(path, "the substituted value %q is not true or false", cli.Safe(v))
		}
		tk := *sn.Token
		tk.Value = strconv.FormatBool(b)
		return ast.Bool(&tk), nil
	}
	if isString {
		sn.Value = v
		return sn, nil
	}
	if ln, ok := n.(*ast.LiteralNode); ok {
		ln.Value.Value = v
	}
	return n, nil
}

// substitute replaces ${VAR} by the environment variable VAR and
// ${file:path} by the contents of the file (without trailing newlines).
// $${ is a literal ${.
func (d *yamlDoc) substitute(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i] + "{")
			s = s[i+2:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q: ${ without its closing }", cli.Safe(s[i:]))
		}
		b.WriteString(s[:i])
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		if p, ok := strings.CutPrefix(ref, "file:"); ok {
			if p == "" {
				return "", errors.New("${file:}: no path")
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(d.dir, p)
			}
			c, err := d.readFile(p)
			if err != nil {
				return "", fmt.Errorf("${file:%s}: %w", ref[5:], unwrapPath(err))
			}
			b.WriteString(strings.TrimRight(string(c), "\r\n"))
			continue
		}
		if !validEnvName(ref) {
			return "", fmt.Errorf("${%s}: not an environment variable name (letters, digits, _) nor file:PATH", cli.Safe(ref))
		}
		v, ok := d.getenv(ref)
		if !ok {
			return "", fmt.Errorf("${%s}: the environment variable %s is not set", ref, ref)
		}
		b.WriteString(v)
	}
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// yamlNames maps the yaml names of t's fields to the fields.
func yamlNames(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		m[name] = f
	}
	return m
}

func keysOf(m map[string]reflect.StructField) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// didYouMean suggests the nearest of names to s, or returns "".
func didYouMean(s string, names []string) string {
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := cli.EditDistance(strings.ToLower(s), n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" && (bestD <= 2 || bestD <= len(best)/3 || strings.Contains(best, strings.ToLower(s)) || strings.Contains(strings.ToLower(s), best)) {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}

// choice checks that v is one of choices, at the key path.
func (d *yamlDoc) choice(path, v string, choices ...string) error {
	for _, c := range choices {
		if v == c {
			return nil
		}
	}
	return d.errAt(path, "%q is not one of %s%s", cli.Safe(v), strings.Join(choices, ", "), didYouMean(v, choices))
}
