package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// headerStart opens every file import writes: what tells a file import may
// replace from one it must not touch.
const headerStart = "Imported by `svclab import`"

// Wrote tells whether head, the start of a file, is the start of one that
// import wrote.
func Wrote(head []byte) bool {
	return bytes.HasPrefix(head, []byte("# "+headerStart+" "))
}

// Encode writes the topology file: a header that says where it came from, how
// it was cut and what it could not hold, then the file itself, without the
// empty fields Kubernetes types print (creationTimestamp: null, status: {}).
func (r *Result) Encode(sources []string) ([]byte, error) {
	j, err := json.Marshal(r.File)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(j, &doc); err != nil {
		return nil, err
	}
	prune(&doc)
	plain(&doc)
	var head strings.Builder
	fmt.Fprintf(&head, "%s from %s.\n", headerStart, strings.Join(sources, ", "))
	head.WriteString("Services are selectorless: their EndpointSlices are the cluster's, endpoints\n" +
		"with their conditions as they were, each on a pod made at its address on its node.\n")
	if len(r.Cut) > 0 {
		head.WriteString("Cut down:\n")
		for _, c := range r.Cut {
			fmt.Fprintf(&head, "  - %s\n", c)
		}
	}
	if len(r.Notes) > 0 {
		head.WriteString("Not as the cluster has it (and what was done instead):\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&head, "  - %s\n", n)
		}
	}
	doc.HeadComment = strings.TrimRight(head.String(), "\n")
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// prune drops null values and empty mappings from mappings, depth first.
func prune(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			prune(c)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			prune(c)
		}
	case yaml.MappingNode:
		var kept []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if prune(v) {
				continue
			}
			kept = append(kept, k, v)
		}
		n.Content = kept
		return len(kept) == 0
	case yaml.ScalarNode:
		return n.Tag == "!!null"
	}
	return false
}

// plain makes the JSON-styled nodes block YAML, with strings unquoted where
// YAML allows.
func plain(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style = 0
	}
	for _, c := range n.Content {
		plain(c)
	}
}
