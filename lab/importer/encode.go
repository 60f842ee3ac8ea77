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
	if r.Manifest {
		head.WriteString("A manifest no cluster ran: Services keep their selectors, and the lab derives\n" +
			"their endpoints from the pods made for its workloads, as the controllers would.\n")
	} else {
		head.WriteString("Services are selectorless: their EndpointSlices are the cluster's, endpoints\n" +
			"with their conditions as they were, each on a pod made at its address on its node.\n")
	}
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
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(head.String(), "\n"), "\n") {
		b.WriteString("# " + l + "\n")
	}
	b.WriteString("\n")
	if err := encodeTop(&b, doc.Content[0]); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// encodeTop writes the file's mapping a field at a time, and a list's items
// one at a time: yaml.v3's emitter grows its buffer for the whole document
// (1.8 GB of allocations for the 11 MB file of a 10,000-Service cluster), for
// pieces it stays small. The text is what one Encode of the whole prints.
func encodeTop(b *bytes.Buffer, root *yaml.Node) error {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			if err := encodeNode(b, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{k, v}}, ""); err != nil {
				return err
			}
			continue
		}
		if err := encodeNode(b, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{k, {Kind: yaml.SequenceNode}}}, ""); err != nil {
			return err
		}
		// That wrote "key: []": the items follow the key instead.
		b.Truncate(b.Len() - len(" []\n"))
		b.WriteString("\n")
		for _, item := range v.Content {
			if err := encodeNode(b, &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{item}}, "  "); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeNode writes n as YAML, each line after indent.
func encodeNode(b *bytes.Buffer, n *yaml.Node, indent string) error {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	for _, line := range bytes.SplitAfter(out.Bytes(), []byte("\n")) {
		if len(line) > 0 {
			b.WriteString(indent)
			b.Write(line)
		}
	}
	return nil
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
