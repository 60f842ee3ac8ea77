package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/importer"
	"github.com/svclab/svclab/lab/topology"
)

// kubectlDump is what `kubectl get nodes,services,endpointslices,pods -A -o
// json` prints of a lab's state as its API server would hold it (the specs'
// round trip takes the real thing from a lab with a control plane).
func kubectlDump(t *testing.T, topo *topology.Topology) []byte {
	t.Helper()
	var items []runtime.RawExtension
	add := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, runtime.RawExtension{Raw: data})
	}
	for _, n := range topo.Nodes {
		add(corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Spec:       corev1.NodeSpec{PodCIDR: n.PodCIDR.String(), PodCIDRs: []string{n.PodCIDR.String()}},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP.String()}}},
		})
	}
	for _, s := range topo.Services {
		add(s)
	}
	for _, s := range topo.EndpointSlices() {
		s.APIVersion, s.Kind = "discovery.k8s.io/v1", "EndpointSlice"
		add(s)
	}
	for _, p := range topo.Pods {
		ready := corev1.ConditionTrue
		if !p.Ready {
			ready = corev1.ConditionFalse
		}
		pod := corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
			Spec:       corev1.PodSpec{NodeName: p.Node, Containers: []corev1.Container{{Name: "c", Ports: p.Ports}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.IP.String(),
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
		if p.Terminating {
			pod.DeletionTimestamp = &metav1.Time{}
		}
		add(pod)
	}
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestImportRoundTrip: a topology's state as kubectl prints it, imported (with
// the topology's clients and external IP routes, which no dump holds), plans the same checks with the
// same expectations, and renders the same rules on every node, in iptables and
// IPVS mode.
func TestImportRoundTrip(t *testing.T) {
	for _, name := range []string{"../../topologies/web.yaml", "../../topologies/httpd.yaml", "../../specs/testdata/loadbalancers.yaml"} {
		for _, controlPlane := range []bool{false, true} {
			roundTrip(t, name, controlPlane)
		}
	}
}

// roundTrip imports the state of the topology in file name, with a control
// plane (and so its cluster DNS: kube-dns and CoreDNS pods in the dump) or
// without, and compares plans and rules.
func roundTrip(t *testing.T, name string, controlPlane bool) {
	orig, err := topology.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	if controlPlane {
		if err := orig.EnableControlPlane(); err != nil {
			t.Fatal(err)
		}
		name += " with a control plane"
	}
	dump := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(dump, kubectlDump(t, orig), 0o644); err != nil {
		t.Fatal(err)
	}
	var clients []topology.ClientSpec
	for _, c := range orig.Clients {
		clients = append(clients, topology.ClientSpec{Name: c.Name, IP: c.IP.String()})
	}
	var routes []topology.ExternalIPRouteSpec
	for _, r := range orig.ExternalIPRoutes {
		routes = append(routes, topology.ExternalIPRouteSpec{IP: r.IP.String(), Nodes: r.Nodes})
	}
	data, res, err := importer.Import([]string{dump}, importer.Options{Name: orig.Name, Clients: clients, ExternalIPRoutes: routes})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	imported, err := topology.Parse(name+" imported", data)
	if err != nil {
		t.Fatal(err)
	}
	if controlPlane {
		if err := imported.EnableControlPlane(); err != nil {
			t.Fatal(err)
		}
		if imported.DNS == nil || *imported.DNS != *orig.DNS {
			t.Errorf("%s: the imported cluster DNS is %v, want %v", name, imported.DNS, orig.DNS)
		}
	}
	t.Logf("%s: notes: %s", name, strings.Join(res.Notes, "; "))
	if len(routes) > 0 && !controlPlane {
		// Negative control: without its routes, the lab sends outside traffic
		// to external IPs elsewhere, and the plan says so.
		other, _, err := importer.Import([]string{dump}, importer.Options{Name: orig.Name, Clients: clients})
		if err != nil {
			t.Fatal(err)
		}
		unrouted, err := topology.Parse(name+" imported without routes", other)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := planFor(orig, lab.Options{Mode: "iptables"}, "")
		b, _ := planFor(unrouted, lab.Options{Mode: "iptables"}, "")
		if checkLines(a.Checks("x")) == checkLines(b.Checks("x")) {
			t.Errorf("%s: the plan does not tell external IP routes apart", name)
		}
	}
	for _, mode := range []string{"iptables", "ipvs"} {
		o := lab.Options{Mode: mode, ControlPlane: controlPlane}
		a, err := planFor(orig, o, "")
		if err != nil {
			t.Fatal(err)
		}
		b, err := planFor(imported, o, "")
		if err != nil {
			t.Fatal(err)
		}
		ca, cb := checkLines(a.Checks(mode)), checkLines(b.Checks(mode))
		if ca != cb {
			t.Errorf("%s, %s: the imported lab plans other checks:\n--- original\n%s\n--- imported\n%s", name, mode, ca, cb)
		}
		if controlPlane && len(a.Lookups) == 0 {
			t.Errorf("%s: no DNS checks planned", name)
		}
		for _, n := range orig.Nodes {
			ra, err := renderNode(orig, o, n.Name)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := renderNode(imported, o, n.Name)
			if err != nil {
				t.Fatal(err)
			}
			if ra != rb {
				t.Errorf("%s, %s, node %s: the imported lab's rules differ:\n--- original\n%s\n--- imported\n%s", name, mode, n.Name, ra, rb)
			}
		}
	}
}

// checkLines are the checks, one JSON line each, in name order: an import
// lists pods by address, a file as it likes.
func checkLines[C any](checks []C) string {
	var lines []string
	for _, c := range checks {
		data, _ := json.Marshal(c)
		lines = append(lines, string(data))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestImportOutputKeepsTheUsersFiles: -o writes a new file, and replaces one
// an earlier import wrote; a file of the user's, the import's own input and a
// directory are refused with exit 2, each left as it was.
func TestImportOutputKeepsTheUsersFiles(t *testing.T) {
	topo, err := topology.Load("../../topologies/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.json")
	dumpData := kubectlDump(t, topo)
	if err := os.WriteFile(dump, dumpData, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(out string) (int, string) {
		var stderr strings.Builder
		return runSvclab([]string{"import", dump, "-o", out}, &stderr), stderr.String()
	}

	out := filepath.Join(dir, "lab.yaml")
	if code, said := run(out); code != 0 {
		t.Fatalf("import -o a new file: exit %d: %s", code, said)
	}
	first, err := os.ReadFile(out)
	if err != nil || !importer.Wrote(first) {
		t.Fatalf("import wrote %q (%v), which does not say it is import's", first, err)
	}
	// Its own earlier output is replaced.
	if code, said := run(out); code != 0 {
		t.Fatalf("import -o its own earlier output: exit %d: %s", code, said)
	}

	mine := filepath.Join(dir, "notes.yaml")
	const notes = "# my notes\nkind: List\n"
	if err := os.WriteFile(mine, []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out, want, before string
	}{
		{mine, "svclab import did not write it", notes},
		{empty, "svclab import did not write it", ""},
		{dump, "is also an input", string(dumpData)},
		{sub, "a directory", ""},
	} {
		code, said := run(c.out)
		if code != exitUsage || !strings.Contains(said, c.want) || !strings.Contains(said, c.out) {
			t.Errorf("import -o %s: exit %d, %q; want exit %d naming the file and %q", c.out, code, said, exitUsage, c.want)
		}
		if fi, err := os.Stat(c.out); err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(c.out); string(b) != c.before {
				t.Errorf("import -o %s changed it to %q", c.out, b)
			}
		}
	}
	// Nothing but what the test made: no temporary file stays.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"dump.json", "empty.yaml", "lab.yaml", "notes.yaml", "sub"}; !slices.Equal(names, want) {
		t.Errorf("the directory holds %v, want %v", names, want)
	}
}
