package kube

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	strictjson "sigs.k8s.io/json"

	"github.com/svclab/svclab/lab/proxy"
)

// Kube-proxy's ports, bound on the node's address inside the node's namespace
// (upstream's defaults are 0.0.0.0:10256 and 127.0.0.1:10249).
const (
	ProxyHealthzPort = 10256
	ProxyMetricsPort = 10249
)

const (
	proxyAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	proxyKind       = "KubeProxyConfiguration"
)

// ProxyConfig is what a lab decides in a node's KubeProxyConfiguration; every other
// field keeps kube-proxy's default unless the user's fragment sets it.
type ProxyConfig struct {
	// Mode is iptables, nftables or ipvs.
	Mode string
	// ClusterCIDR is the pods' range: traffic from outside it to a ClusterIP is
	// masqueraded.
	ClusterCIDR netip.Prefix
	// NodeName is the node's Node object (hostnameOverride), where kube-proxy reads
	// its node address.
	NodeName string
	// NodeIP is where its healthz (ProxyHealthzPort) and metrics (ProxyMetricsPort)
	// servers listen.
	NodeIP netip.Addr
	// Kubeconfig is the kubeconfig kube-proxy reads (clientConnection.kubeconfig).
	Kubeconfig string
	// MinSyncPeriod is the mode's minSyncPeriod; 0 keeps kube-proxy's default (1 s).
	MinSyncPeriod time.Duration
	// Fragment is the user's --kube-proxy-config, merged over the rest; nil: none.
	Fragment *ProxyFragment
}

// labOwned are the fields a lab derives from its own state, with why and what
// to use instead; a fragment that sets them would make kube-proxy disagree with
// the lab (its mode, its node, its API server), so ReadProxyFragment refuses
// them. clusterCIDR is the user's: the topology's is only its default.
var labOwned = map[string]string{
	"mode":                        "the lab's mode, which verify's expectations and the readers follow; use --mode",
	"hostnameOverride":            "the node's name, which kube-proxy reads its Node (address, podCIDR) by; name the nodes in the topology",
	"clientConnection.kubeconfig": "the lab's kubeconfig for the lab's own API server; there is no other to connect to",
}

// ProxyFragment is a user's partial KubeProxyConfiguration, checked against
// kube-proxy's own configuration type.
type ProxyFragment struct {
	file   string
	fields map[string]any
}

// ReadProxyFragment reads a partial KubeProxyConfiguration (YAML) to merge over a
// lab's: only fields of kubeproxy.config.k8s.io/v1alpha1, spelled as kube-proxy
// spells them (case matters, as in kube-proxy's own strict decoding), with values
// of their types; apiVersion and kind may be given and must then be that version
// and KubeProxyConfiguration. Errors read "file:line: field.path: what is wrong".
func ReadProxyFragment(file string) (*ProxyFragment, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseProxyFragment(file, data)
}

func parseProxyFragment(file string, data []byte) (*ProxyFragment, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(file, err)
	}
	fields := map[string]any{}
	root := &doc
	if len(doc.Content) > 0 {
		root = doc.Content[0]
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: want a mapping of %s fields", file, root.Line, proxyKind)
		}
		if err := root.Decode(&fields); err != nil {
			return nil, yamlError(file, err)
		}
	}
	at := func(path string) string {
		if line := lineOf(root, path); line > 0 {
			return fmt.Sprintf("%s:%d: %s", file, line, path)
		}
		return fmt.Sprintf("%s: %s", file, path)
	}
	for path, owner := range labOwned {
		if _, set := lookup(fields, path); set {
			return nil, fmt.Errorf("%s: set by svclab: %s (remove it from the file)", at(path), owner)
		}
	}
	if v, set := fields["apiVersion"]; set && v != proxyAPIVersion {
		return nil, fmt.Errorf("%s: %v: want %s (or leave it out)", at("apiVersion"), v, proxyAPIVersion)
	}
	if v, set := fields["kind"]; set && v != proxyKind {
		return nil, fmt.Errorf("%s: %v: want %s (or leave it out)", at("kind"), v, proxyKind)
	}
	if err := checkProxyFields(fields); err != nil {
		var fe fieldError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%s: %s", at(fe.path), fe.what)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	// svclab's maxPerCore 0 stays: any other would have kube-proxy resize the
	// whole machine's conntrack table.
	if v, set := lookup(fields, "conntrack.maxPerCore"); set && v != nil {
		if n, ok := v.(int); ok {
			n32 := int32(n)
			if err := proxy.CheckConntrackMax(&n32); err != nil {
				return nil, fmt.Errorf("%s: %w", at("conntrack.maxPerCore"), err)
			}
		}
	}
	return &ProxyFragment{file: file, fields: fields}, nil
}

// yamlLine is how the YAML library starts a message about one line.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// yamlError turns the YAML library's errors (a syntax error "yaml: line 3: ...",
// or a list of "line 3: ..." from decoding) into "file:3: ..." lines.
func yamlError(file string, err error) error {
	msgs, prefix := []string{err.Error()}, "invalid YAML: "
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs, prefix = te.Errors, ""
	}
	for i, m := range msgs {
		if loc := yamlLine.FindStringSubmatch(m); loc != nil {
			msgs[i] = fmt.Sprintf("%s:%s: %s%s", file, loc[1], prefix, m[len(loc[0]):])
		} else {
			msgs[i] = fmt.Sprintf("%s: %s%s", file, prefix, strings.TrimPrefix(m, "yaml: "))
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// fieldError is a decoding error about one field.
type fieldError struct{ path, what string }

func (e fieldError) Error() string { return e.path + ": " + e.what }

// checkProxyFields decodes fields into kube-proxy's configuration type as strictly
// as kube-proxy does (sigs.k8s.io/json: case-sensitive, no unknown or duplicate
// fields), so a field kube-proxy would refuse or ignore is an error here.
func checkProxyFields(fields map[string]any) error {
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	var cfg kubeproxyconfig.KubeProxyConfiguration
	strict, err := strictjson.UnmarshalStrict(b, &cfg)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		return fieldError{typeErr.Field, fmt.Sprintf("got %s, want %s", typeErr.Value, typeErr.Type)}
	case err != nil:
		// A field's own decoder failed (a duration that does not parse, ...):
		// its message names no field, so find it.
		if path := blame(fields); path != "" {
			return fieldError{path, err.Error()}
		}
		return err
	}
	if len(strict) > 0 {
		var fe strictjson.FieldError
		if errors.As(strict[0], &fe) {
			what, _, _ := strings.Cut(fe.Error(), " \"")
			return fieldError{fe.FieldPath(), what + " of " + proxyKind}
		}
		return strict[0]
	}
	return nil
}

// blame returns the dotted path of the deepest field whose value alone does not
// decode, or "".
func blame(fields map[string]any) string {
	var walk func(prefix []string, m map[string]any) string
	walk = func(prefix []string, m map[string]any) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			path := append(prefix[:len(prefix):len(prefix)], k)
			var v any = m[k]
			for i := len(path) - 1; i >= 0; i-- {
				v = map[string]any{path[i]: v}
			}
			b, err := json.Marshal(v)
			if err == nil {
				var cfg kubeproxyconfig.KubeProxyConfiguration
				if _, err = strictjson.UnmarshalStrict(b, &cfg); err == nil {
					continue
				}
			}
			if sub, ok := m[k].(map[string]any); ok {
				if p := walk(path, sub); p != "" {
					return p
				}
			}
			return strings.Join(path, ".")
		}
		return ""
	}
	return walk(nil, fields)
}

// ProxyConfigYAML is the KubeProxyConfiguration of one node: the lab's fields,
// with c.Fragment merged over them (maps key by key, any other value replaces,
// null removes the field so kube-proxy's default applies).
func ProxyConfigYAML(c ProxyConfig) ([]byte, error) {
	if _, err := proxy.Lookup(c.Mode); err != nil {
		return nil, fmt.Errorf("kube-proxy: %w", err)
	}
	section := map[string]any{}
	if c.MinSyncPeriod > 0 {
		section["minSyncPeriod"] = c.MinSyncPeriod.String()
	}
	fields := map[string]any{
		"apiVersion":       proxyAPIVersion,
		"kind":             proxyKind,
		"mode":             c.Mode,
		"clusterCIDR":      c.ClusterCIDR.String(),
		"hostnameOverride": c.NodeName,
		"clientConnection": map[string]any{"kubeconfig": c.Kubeconfig},
		// Inside the node, never the root namespace's wildcard.
		"healthzBindAddress": netip.AddrPortFrom(c.NodeIP, ProxyHealthzPort).String(),
		"metricsBindAddress": netip.AddrPortFrom(c.NodeIP, ProxyMetricsPort).String(),
		// nf_conntrack_max is read-only in a child network namespace: with 0
		// kube-proxy leaves it alone instead of failing on a host whose value is
		// below its computed minimum.
		"conntrack": map[string]any{"maxPerCore": 0},
		c.Mode:      section,
	}
	if c.Fragment != nil {
		merge(fields, c.Fragment.fields)
	}
	if err := checkProxyFields(fields); err != nil {
		if c.Fragment != nil {
			return nil, fmt.Errorf("kube-proxy configuration with %s: %w", c.Fragment.file, err)
		}
		return nil, fmt.Errorf("kube-proxy configuration: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(fields); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteProxyConfig writes ProxyConfigYAML(c) to path.
func WriteProxyConfig(path string, c ProxyConfig) error {
	b, err := ProxyConfigYAML(c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("kube-proxy configuration: %w", err)
	}
	return nil
}

// merge applies patch to dst as a JSON merge patch (RFC 7386) does.
func merge(dst, patch map[string]any) {
	keys := make([]string, 0, len(patch))
	for k := range patch {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := patch[k]
		if v == nil {
			delete(dst, k)
			continue
		}
		pm, pIsMap := v.(map[string]any)
		dm, dIsMap := dst[k].(map[string]any)
		if pIsMap && dIsMap {
			merge(dm, pm)
			continue
		}
		if pIsMap {
			// A fresh copy, so null members are dropped as a merge patch drops them.
			m := map[string]any{}
			merge(m, pm)
			v = m
		}
		dst[k] = v
	}
}

// lookup finds a dotted path in nested maps.
func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// lineOf finds the line of a dotted field path ("conntrack.maxPerCore",
// "nodePortAddresses[1]") in a YAML mapping node; 0 if it is not there.
func lineOf(n *yaml.Node, path string) int {
	line := 0
	for _, part := range splitPath(path) {
		if n == nil {
			return line
		}
		switch {
		case n.Kind == yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					line, next = n.Content[i].Line, n.Content[i+1]
				}
			}
			n = next
		case n.Kind == yaml.SequenceNode:
			i, err := strconv.Atoi(strings.Trim(part, "[]"))
			if err != nil || i < 0 || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		default:
			return line
		}
	}
	return line
}

// splitPath splits "a.b[2].c" into a, b, [2], c.
func splitPath(path string) []string {
	var parts []string
	for _, p := range strings.Split(path, ".") {
		for {
			i := strings.Index(p, "[")
			if i < 0 {
				break
			}
			if i > 0 {
				parts = append(parts, p[:i])
			}
			j := strings.Index(p[i:], "]")
			if j < 0 {
				break
			}
			parts = append(parts, p[i:i+j+1])
			p = p[i+j+1:]
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// Over returns a fragment with f merged over under (f wins), for settings given
// two ways: command-line shorthands under a user's file, say. Either may be nil.
func (f *ProxyFragment) Over(under *ProxyFragment) *ProxyFragment {
	switch {
	case f == nil:
		return under
	case under == nil:
		return f
	}
	fields := map[string]any{}
	merge(fields, under.fields)
	merge(fields, f.fields)
	return &ProxyFragment{file: f.file + " over " + under.file, fields: fields}
}

// NewProxyFragment is a fragment of the given fields (nested maps, as the YAML
// reads), checked as ReadProxyFragment checks a file; source names it in errors.
func NewProxyFragment(source string, fields map[string]any) (*ProxyFragment, error) {
	m := map[string]any{}
	merge(m, fields)
	if err := checkProxyFields(m); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &ProxyFragment{file: source, fields: m}, nil
}

// Decode is the fragment as kube-proxy's configuration type, for svclab's own
// proxiers to read, with the dotted paths of the fields it sets.
func (f *ProxyFragment) Decode() (kubeproxyconfig.KubeProxyConfiguration, []string, error) {
	var cfg kubeproxyconfig.KubeProxyConfiguration
	if f == nil {
		return cfg, nil, nil
	}
	b, err := json.Marshal(f.fields)
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", f.file, err)
	}
	var paths []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(prefix+k+".", sub)
				continue
			}
			paths = append(paths, prefix+k)
		}
	}
	walk("", f.fields)
	sort.Strings(paths)
	return cfg, paths, nil
}

// Sets tells whether the fragment gives the field at the dotted path, null
// (kube-proxy's default) included.
func (f *ProxyFragment) Sets(path string) bool {
	if f == nil {
		return false
	}
	_, ok := lookup(f.fields, path)
	return ok
}

// Source names where the fragment came from.
func (f *ProxyFragment) Source() string { return f.file }
