package topology

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The file is read in two steps. First the YAML node tree is walked against the Go
// types, by their json tags as Kubernetes decodes them, so that every unknown
// field, duplicate key and value of the wrong type is reported with its line.
// The walk yields a plain JSON value, which encoding/json then decodes into File:
// YAML to JSON to Go is how Kubernetes reads YAML too (sigs.k8s.io/yaml), but
// converting the already-parsed YAML 1.2 tree ourselves keeps "yes" and "on" the
// strings the user sees rather than YAML 1.1 booleans.

// maxExpanded bounds what aliases add to the walk, so that a file of aliases
// to aliases ("billion laughs") cannot make Parse run away. The document's own
// values are not bounded: a file of 10,000 Services (an import of a large
// cluster) has millions, and costs no more than its size.
const maxExpanded = 1 << 18

type decoder struct {
	source string
	pos    Positions
	errs   ErrorList
	// typeErrs is set when a value has the wrong type: the JSON value is then
	// incomplete, and checking the meaning of the rest would only add noise.
	typeErrs bool
	nodes    int
	// limit is the document's own nodes plus maxExpanded.
	limit  int
	fields map[reflect.Type][]jsonField
}

func (d *decoder) errorAt(line int, path, format string, args ...any) {
	d.errs = append(d.errs, Error{Source: d.source, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) typeError(n *yaml.Node, path, want string) {
	d.typeErrs = true
	d.errorAt(n.Line, path, "want %s, got %s", want, describe(n))
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeFile reads one lab file into File, recording where every field is.
func decodeFile(source string, data []byte) (*File, Positions, ErrorList) {
	var f File
	pos, errs, ok := DecodeYAML(source, data, &f, "a lab file",
		"the file is empty; a lab needs at least a name, clusterCIDR, serviceCIDR and nodes")
	if !ok {
		return nil, pos, errs
	}
	return &f, pos, errs
}

// DecodeYAML reads data, one YAML document that source names in errors, into v, a
// pointer to a struct whose json tags name its fields, the way a lab file is read:
// every unknown field, duplicate key and value of the wrong type is an Error with
// its line and field path, and pos gives the line of every field path present.
// kind names such a file in messages ("a lab file"); empty is the message for an
// empty one. filled is false when v was left as it was (an empty file, a value of
// the wrong type); errors such as unknown fields leave it filled, so the caller
// can go on to check what the fields mean and report every mistake at once.
func DecodeYAML(source string, data []byte, v any, kind, empty string) (pos Positions, errs ErrorList, filled bool) {
	d := &decoder{source: source, pos: Positions{}, fields: map[reflect.Type][]jsonField{}}
	root, line, msg := parseYAML(data, kind)
	if msg != "" {
		d.errorAt(line, "", "%s", msg)
		return nil, d.errs, false
	}
	if root == nil {
		d.errorAt(0, "", "%s", empty)
		return nil, d.errs, false
	}
	d.pos[""] = root.Line
	d.limit = countNodes(root) + maxExpanded
	val, _ := d.value(root, reflect.TypeOf(v).Elem(), "")
	if d.typeErrs {
		return d.pos, d.errs, false
	}
	raw, err := json.Marshal(val)
	if err == nil {
		if err = json.Unmarshal(raw, v); err == nil {
			return d.pos, d.errs, true
		}
	}
	// The walk admits only what the types accept, so this is a bug in the walk.
	d.errorAt(0, "", "decode: %v", err)
	return d.pos, d.errs, false
}

// parseYAML returns the single document's root node, nil for an empty file, or
// what is wrong with the YAML and where.
func parseYAML(data []byte, kind string) (root *yaml.Node, line int, msg string) {
	defer func() {
		// The YAML library reports some malformed input by panicking; Parse
		// promises an error instead.
		if p := recover(); p != nil {
			root, line, msg = nil, 0, fmt.Sprintf("invalid YAML: %v", p)
		}
	}()
	syntax := func(err error) (*yaml.Node, int, string) {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, line, "invalid YAML: " + m[2]
		}
		return nil, 0, "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, ""
		}
		return syntax(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return syntax(err)
	default:
		return nil, next.Line, kind + " holds one YAML document; this starts another"
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, 0, ""
	}
	return doc.Content[0], 0, ""
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// value checks n against t and returns it as a JSON value; ok is false when the
// value is to be left out.
func (d *decoder) value(n *yaml.Node, t reflect.Type, path string) (v any, ok bool) {
	n, ok = d.resolve(n, path)
	if !ok {
		return nil, false
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	ptr := reflect.PointerTo(t)
	switch {
	case ptr.Implements(jsonUnmarshaler):
		return d.custom(n, t, path)
	case ptr.Implements(textUnmarshaler):
		return d.scalar(n, reflect.TypeFor[string](), path)
	}
	switch t.Kind() {
	case reflect.Struct:
		return d.object(n, t, path)
	case reflect.Map:
		return d.mapping(n, t, path)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return d.scalar(n, reflect.TypeFor[string](), path)
		}
		return d.sequence(n, t, path)
	case reflect.Interface:
		return d.generic(n, path)
	default:
		return d.scalar(n, t, path)
	}
}

// resolve follows aliases and counts the node against the budget.
func (d *decoder) resolve(n *yaml.Node, path string) (*yaml.Node, bool) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.nodes++
	if d.nodes == d.limit {
		d.typeErrs = true
		d.errorAt(n.Line, path, "aliases expand the document by more than %d values (aliases of aliases?)", maxExpanded)
	}
	return n, d.nodes < d.limit
}

// countNodes counts the nodes of the tree under n, aliases not followed.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

func (d *decoder) object(n *yaml.Node, t reflect.Type, path string) (any, bool) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, "a mapping")
		return nil, false
	}
	fields := d.fieldsOf(t)
	out := map[string]any{}
	d.pairs(n, path, child, func(k string, kn, vn *yaml.Node) {
		p := child(path, k)
		f, found := lookupField(fields, k)
		if !found {
			d.errorAt(kn.Line, p, "unknown field%s", suggest(k, fields))
			return
		}
		d.pos[p] = kn.Line
		if v, ok := d.value(vn, f.typ, p); ok {
			out[k] = v
		}
	})
	return out, true
}

func (d *decoder) mapping(n *yaml.Node, t reflect.Type, path string) (any, bool) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, "a mapping")
		return nil, false
	}
	out := map[string]any{}
	d.pairs(n, path, key, func(k string, kn, vn *yaml.Node) {
		p := key(path, k)
		d.pos[p] = kn.Line
		if v, ok := d.value(vn, t.Elem(), p); ok {
			out[k] = v
		}
	})
	return out, true
}

// pairs calls each for every key of a mapping, reporting keys that are not plain
// strings and keys given twice.
func (d *decoder) pairs(n *yaml.Node, path string, keyPath func(path, k string) string, each func(k string, kn, vn *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		for kn.Kind == yaml.AliasNode && kn.Alias != nil {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			d.typeError(kn, path, "a plain key")
			continue
		}
		if kn.ShortTag() == "!!merge" {
			d.typeErrs = true
			d.errorAt(kn.Line, path, "merge keys (<<) are not supported; repeat the fields")
			continue
		}
		k := kn.Value
		if first, dup := seen[k]; dup {
			d.errorAt(kn.Line, keyPath(path, k), "duplicate key (first given on line %d)", first)
			continue
		}
		seen[k] = kn.Line
		each(k, kn, vn)
	}
}

func (d *decoder) sequence(n *yaml.Node, t reflect.Type, path string) (any, bool) {
	if n.Kind != yaml.SequenceNode {
		d.typeError(n, path, "a list")
		return nil, false
	}
	out := make([]any, 0, len(n.Content))
	for i, item := range n.Content {
		p := index(path, i)
		d.pos[p] = item.Line
		v, ok := d.value(item, t.Elem(), p)
		if !ok {
			v = nil
		}
		out = append(out, v)
	}
	return out, true
}

func (d *decoder) scalar(n *yaml.Node, t reflect.Type, path string) (any, bool) {
	if n.Kind != yaml.ScalarNode {
		d.typeError(n, path, wantOf(t))
		return nil, false
	}
	tag := n.ShortTag()
	switch t.Kind() {
	case reflect.String:
		// A date is a string to a string field; YAML would call it a timestamp.
		if tag == "!!str" || tag == "!!timestamp" {
			return n.Value, true
		}
	case reflect.Bool:
		if tag == "!!bool" {
			var b bool
			if n.Decode(&b) == nil {
				return b, true
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if tag == "!!int" {
			v := reflect.New(t)
			if err := n.Decode(v.Interface()); err != nil {
				d.typeErrs = true
				d.errorAt(n.Line, path, "%s does not fit in %s", n.Value, t.Kind())
				return nil, false
			}
			return v.Elem().Interface(), true
		}
	case reflect.Float32, reflect.Float64:
		if tag == "!!int" || tag == "!!float" {
			var f float64
			if n.Decode(&f) == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f, true
			}
		}
	}
	d.typeError(n, path, wantOf(t))
	return nil, false
}

// custom checks a value whose type decodes itself (intstr.IntOrString,
// resource.Quantity, metav1.Time) by letting it try.
func (d *decoder) custom(n *yaml.Node, t reflect.Type, path string) (any, bool) {
	start := len(d.errs)
	v, ok := d.generic(n, path)
	if !ok || len(d.errs) > start {
		return nil, false
	}
	raw, err := json.Marshal(v)
	if err == nil {
		err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
	}
	if err != nil {
		d.typeErrs = true
		if t == reflect.TypeFor[intstr.IntOrString]() {
			d.errorAt(n.Line, path, "want a port number or name, got %s", describe(n))
		} else {
			d.errorAt(n.Line, path, "want %s, got %s: %v", wantOf(t), describe(n), err)
		}
		return nil, false
	}
	return v, true
}

// generic converts a subtree whose shape the Go type leaves open.
func (d *decoder) generic(n *yaml.Node, path string) (any, bool) {
	n, ok := d.resolve(n, path)
	if !ok {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		d.pairs(n, path, key, func(k string, kn, vn *yaml.Node) {
			d.pos[key(path, k)] = kn.Line
			if v, ok := d.generic(vn, key(path, k)); ok {
				out[k] = v
			}
		})
		return out, true
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			d.pos[index(path, i)] = item.Line
			v, _ := d.generic(item, index(path, i))
			out = append(out, v)
		}
		return out, true
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b, true
			}
		case "!!int":
			var i int64
			if n.Decode(&i) == nil {
				return i, true
			}
		case "!!float":
			var f float64
			if n.Decode(&f) == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f, true
			}
		default:
			return n.Value, true
		}
	}
	d.typeErrs = true
	d.errorAt(n.Line, path, "unreadable value %s", describe(n))
	return nil, false
}

// describe names a YAML value for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing (null)"
		case "!!str", "!!timestamp":
			return "the string " + strconv.Quote(n.Value)
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		}
		return strconv.Quote(n.Value)
	}
	return "an unreadable value"
}

func wantOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string (quote values that look like numbers or booleans)"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct:
		if strings.HasSuffix(t.Name(), "Time") {
			return "a time such as 2025-01-02T15:04:05Z"
		}
	}
	return "a " + t.Name()
}

// jsonField is one key a struct accepts in JSON.
type jsonField struct {
	name string
	typ  reflect.Type
}

// fieldsOf lists the JSON keys of a struct as encoding/json sees them: embedded
// structs without a name (`json:",inline"`) lend their fields to the outer one.
func (d *decoder) fieldsOf(t reflect.Type) []jsonField {
	if fs, ok := d.fields[t]; ok {
		return fs
	}
	var fs []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		inline := sf.Anonymous && name == "" || strings.Contains(","+opts+",", ",inline,")
		if inline {
			et := sf.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				fs = append(fs, d.fieldsOf(et)...)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, jsonField{name: name, typ: sf.Type})
	}
	d.fields[t] = fs
	return fs
}

func lookupField(fs []jsonField, name string) (jsonField, bool) {
	for _, f := range fs {
		if f.name == name {
			return f, true
		}
	}
	return jsonField{}, false
}
