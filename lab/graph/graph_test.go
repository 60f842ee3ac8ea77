package graph

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/record"
)

func testLab() Lab {
	return Lab{Network: "node network 192.168.1.0/24", Lab: record.Lab{Name: "web", Members: []record.Member{
		{Name: "fabric", Kind: member.KindFabric},
		{Name: "node-1", Kind: member.KindNode, IP: "192.168.1.10"},
		{Name: "node-2", Kind: member.KindNode, IP: "192.168.1.11"},
		{Name: "outside", Kind: member.KindClient, IP: "192.168.1.100"},
		{Name: "lb", Kind: member.KindLoadBalancer, IP: "192.168.1.200"},
		{Name: "web-a", Kind: member.KindPod, IP: "10.244.1.10", Node: "node-1"},
		{Name: "client", Kind: member.KindPod, IP: "10.244.1.5", Node: "node-1"},
		{Name: "web-b", Kind: member.KindPod, IP: "10.244.2.10", Node: "node-2"},
	}, Services: []record.Service{{Name: "default/web:http", ClusterIP: "10.96.123.45", Port: 80, Protocol: "TCP", NodePort: 30080,
		Endpoints: []string{"10.244.1.10:8080", "10.244.2.10:8080 (not ready)"}}}}}
}

// TestDOT: every member but the fabric is a vertex with its kind and address;
// nodes, clients and load balancers join the network, pods their node, and the
// Service its endpoints' pods (a not-ready one too), and no one else.
func TestDOT(t *testing.T) {
	var b bytes.Buffer
	if err := DOT(&b, testLab()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`graph "web" {`,
		`"outside" [shape=box, label="outside\nclient\n192.168.1.100"];`,
		`"lb" -- "node network";`, `"node-1" -- "node network";`, `"node-1" -- "web-a";`, `"node-1" -- "client";`, `"node-2" -- "web-b";`,
		`label="default/web:http\n10.96.123.45:80/TCP\nNodePort 30080"`,
		`"svc default/web:http" -- "web-a" [style=dashed];`, `"svc default/web:http" -- "web-b" [style=dashed];`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fabric") || strings.Contains(out, `-- "client" [style=dashed]`) {
		t.Errorf("DOT:\n%s", out)
	}
}

// TestSVG: the picture is well-formed SVG, shows every member, address and
// Service, and keeps every box and line inside its bounds.
func TestSVG(t *testing.T) {
	var b bytes.Buffer
	if err := SVG(&b, testLab()); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	var texts []string
	var width, height int
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inText = e.Name.Local == "text"
			attrs := map[string]int{}
			for _, a := range e.Attr {
				attrs[a.Name.Local], _ = strconv.Atoi(a.Value)
			}
			switch e.Name.Local {
			case "svg":
				width, height = attrs["width"], attrs["height"]
			case "rect":
				if attrs["x"] < 0 || attrs["y"] < 0 || attrs["x"]+attrs["width"] > width || attrs["y"]+attrs["height"] > height {
					t.Errorf("rect %v outside %dx%d", attrs, width, height)
				}
			case "line":
				for _, k := range []string{"x1", "x2"} {
					if attrs[k] < 0 || attrs[k] > width {
						t.Errorf("line %v outside %dx%d", attrs, width, height)
					}
				}
				for _, k := range []string{"y1", "y2"} {
					if attrs[k] < 0 || attrs[k] > height {
						t.Errorf("line %v outside %dx%d", attrs, width, height)
					}
				}
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(e))
			}
		case xml.EndElement:
			inText = false
		}
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"node-1", "192.168.1.10", "outside", "lb", "192.168.1.200", "web-a", "10.244.1.10", "client", "web-b",
		"default/web:http", "10.96.123.45:80/TCP", "NodePort 30080", "node network 192.168.1.0/24"} {
		if !strings.Contains("|"+all+"|", "|"+want+"|") {
			t.Errorf("SVG shows no %q: %s", want, all)
		}
	}
}
