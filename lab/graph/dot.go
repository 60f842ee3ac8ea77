package graph

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// DOT writes the lab as an undirected Graphviz graph: the node network as one
// vertex every node, client, load balancer and control plane joins; each pod
// joined to its node; each Service port joined by dashed edges to its endpoints.
func DOT(w io.Writer, l Lab) error {
	lo := layOut(l)
	b := &strings.Builder{}
	fmt.Fprintf(b, "graph %s {\n", quote(l.Name))
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=10];\n")
	fmt.Fprintf(b, "  %s [shape=box, style=filled, fillcolor=\"#eeeeee\", label=%s];\n", quote("node network"), quote(l.Network))
	for _, m := range lo.top {
		fmt.Fprintf(b, "  %s [shape=box, label=%s];\n  %s -- %s;\n", quote(m.Name), label(memberLabel(m)), quote(m.Name), quote("node network"))
	}
	for _, n := range lo.nodes {
		fmt.Fprintf(b, "  %s [shape=box3d, label=%s];\n  %s -- %s;\n", quote(n.Name), label(memberLabel(n)), quote(n.Name), quote("node network"))
		for _, p := range lo.pods[n.Name] {
			fmt.Fprintf(b, "  %s [shape=ellipse, label=%s];\n  %s -- %s;\n", quote(p.Name), label(memberLabel(p)), quote(n.Name), quote(p.Name))
		}
	}
	for i, s := range lo.services {
		id := quote("svc " + s.Name)
		fmt.Fprintf(b, "  %s [shape=hexagon, style=filled, fillcolor=\"#ddeeff\", label=%s];\n", id, label(serviceLabel(s)))
		for _, p := range lo.endpointPods[i] {
			fmt.Fprintf(b, "  %s -- %s [style=dashed];\n", id, quote(p))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// quote is a DOT string: Go's quoting escapes what DOT needs (quotes and
// backslashes) and more, which DOT reads the same.
func quote(s string) string { return strconv.Quote(s) }

// label joins lines with DOT's centred line break.
func label(lines []string) string {
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = strings.ReplaceAll(strings.Trim(quote(l), `"`), `\n`, " ")
	}
	return `"` + strings.Join(q, `\n`) + `"`
}

func itoa(n int) string { return strconv.Itoa(n) }
