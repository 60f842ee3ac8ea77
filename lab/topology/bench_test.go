package topology

import (
	"fmt"
	"strings"
	"testing"
)

// largeLab has the given number of NodePort Services with two pods each, 200
// pods a node: the scale of kube-proxy's published rule-update figures.
func largeLab(services int) []byte {
	var b strings.Builder
	b.WriteString("name: large\nclusterCIDR: 10.244.0.0/16\nserviceCIDR: 10.96.0.0/12\nnodes:\n")
	nodes := (2*services + 199) / 200
	for n := range nodes {
		fmt.Fprintf(&b, "  - {name: node-%d, ip: 192.168.%d.%d, podCIDR: 10.244.%d.0/24}\n", n, n/250, n%250+1, n)
	}
	b.WriteString("pods:\n")
	for i := range 2 * services {
		fmt.Fprintf(&b, "  - {name: pod-%d, node: node-%d, labels: {app: svc-%d}, ports: [{name: http, containerPort: 8080}]}\n", i, i/200, i/2)
	}
	b.WriteString("services:\n")
	for i := range services {
		fmt.Fprintf(&b, "  - metadata: {name: svc-%d}\n    spec: {type: NodePort, selector: {app: svc-%d}, ports: [{name: http, port: 80, targetPort: http}]}\n", i, i)
	}
	return []byte(b.String())
}

func BenchmarkParseLarge(b *testing.B) {
	for _, n := range []int{100, 2500} {
		data := largeLab(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse("large.yaml", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEndpointSlicesLarge(b *testing.B) {
	top, err := Parse("large.yaml", largeLab(2500))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if got := len(top.EndpointSlices()); got != 2500 {
			b.Fatalf("%d slices", got)
		}
	}
}

func BenchmarkAddPodLarge(b *testing.B) {
	top, err := Parse("large.yaml", largeLab(2500))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c := top.Clone()
		if _, err := c.AddPod(PodSpec{Name: "extra", Node: "node-24", Labels: map[string]string{"app": "svc-1"}}); err != nil {
			b.Fatal(err)
		}
	}
}
