package importer

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/topology"
)

// The shapes below are how kubectl prints one cluster (two nodes, Service web
// selecting app=web, two pods of it, one not ready) when the dump holds no
// EndpointSlice: `get nodes,svc,ep -o yaml` (Endpoints), and `cluster-info dump
// --output-directory` (typed lists whose items have no kind, a directory per
// namespace, pods but no endpoints at all).
const shapesNodes = `{"kind": "NodeList", "apiVersion": "v1", "items": [
 {"metadata": {"name": "node-1"}, "spec": {"podCIDR": "10.244.1.0/24"}, "status": {"addresses": [{"type": "InternalIP", "address": "192.168.1.10"}]}},
 {"metadata": {"name": "node-2"}, "spec": {"podCIDR": "10.244.2.0/24"}, "status": {"addresses": [{"type": "InternalIP", "address": "192.168.1.11"}]}}]}`

const shapesServices = `{"kind": "ServiceList", "apiVersion": "v1", "items": [
 {"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.123.45", "clusterIPs": ["10.96.123.45"], "type": "ClusterIP",
  "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]}}]}`

const shapesPods = `{"kind": "PodList", "apiVersion": "v1", "items": [
 {"metadata": {"name": "web-a", "namespace": "default", "labels": {"app": "web"}}, "spec": {"nodeName": "node-1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
  "status": {"phase": "Running", "podIP": "10.244.1.10", "conditions": [{"type": "Ready", "status": "True"}]}},
 {"metadata": {"name": "web-b", "namespace": "default", "labels": {"app": "web"}}, "spec": {"nodeName": "node-2", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
  "status": {"phase": "Running", "podIP": "10.244.2.10", "conditions": [{"type": "Ready", "status": "False"}]}},
 {"metadata": {"name": "other", "namespace": "default", "labels": {"app": "other"}}, "spec": {"nodeName": "node-2", "containers": [{"name": "c"}]},
  "status": {"phase": "Running", "podIP": "10.244.2.11", "conditions": [{"type": "Ready", "status": "True"}]}}]}`

const shapesEndpoints = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Endpoints
  metadata: {name: web, namespace: default}
  subsets:
  - addresses: [{ip: 10.244.1.10, nodeName: node-1, targetRef: {kind: Pod, name: web-a, namespace: default}}]
    notReadyAddresses: [{ip: 10.244.2.10, nodeName: node-2, targetRef: {kind: Pod, name: web-b, namespace: default}}]
    ports: [{name: http, port: 8080, protocol: TCP}]
`

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// endpointsOf lists the imported lab's endpoints of web as address@node
// ready|not-ready, port.
func endpointsOf(t *testing.T, data []byte) string {
	t.Helper()
	topo, err := topology.Parse("imported", data)
	if err != nil {
		t.Fatalf("import wrote a file svclab refuses: %v\n%s", err, data)
	}
	var eps []string
	for _, s := range topo.EndpointSlices() {
		for _, e := range s.Endpoints {
			state := "ready"
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				state = "not-ready"
			}
			eps = append(eps, e.Addresses[0]+"@"+*e.NodeName+" "+state)
		}
		for _, p := range s.Ports {
			eps = append(eps, "port "+*p.Name+" "+string(*p.Protocol)+" "+strconv.Itoa(int(*p.Port)))
		}
	}
	return strings.Join(eps, ", ")
}

// TestImportWithoutSlices: each shape gives web its two endpoints, the
// not-ready one not ready, on port 8080, and says where they came from; with
// neither slices, Endpoints nor pods, web has none and the note says so.
func TestImportWithoutSlices(t *testing.T) {
	const want = "10.244.1.10@node-1 ready, 10.244.2.10@node-2 not-ready, port http TCP 8080"
	for _, c := range []struct {
		name  string
		files map[string]string
		note  string
		want  string
	}{
		{"get nodes,svc,ep", map[string]string{"nodes.json": shapesNodes, "svc.json": shapesServices, "ep.yaml": shapesEndpoints},
			"its endpoints are its Endpoints object's", want},
		{"cluster-info dump", map[string]string{"nodes.json": shapesNodes, "default/services.json": shapesServices, "default/pods.json": shapesPods,
			"default/events.json":    `{"kind": "EventList", "apiVersion": "v1", "items": [{"metadata": {"name": "e1"}}]}`,
			"default/web-a/logs.txt": "a log line\n", "kube-system/services.json": `{"kind": "ServiceList", "apiVersion": "v1", "items": []}`},
			"its endpoints are the 2 pods of the input its selector app=web matches", want},
		{"no endpoints at all", map[string]string{"nodes.json": shapesNodes, "svc.json": shapesServices},
			"selects pods (app=web), but the input has no EndpointSlice, Endpoints, Pod or workload of it", ""},
	} {
		dir := writeTree(t, c.files)
		data, res, err := Import([]string{dir}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := endpointsOf(t, data); !strings.HasPrefix(got, c.want) || (c.want == "" && got != "") {
			t.Errorf("%s: endpoints %q, want %q", c.name, got, c.want)
		}
		if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, c.note) {
			t.Errorf("%s: notes do not say %q:\n%s", c.name, c.note, notes)
		}
	}
}

// TestImportCutLeavingNothing: a namespace the input does not have is an input
// error naming the namespaces it has, not an empty lab.
func TestImportCutLeavingNothing(t *testing.T) {
	dir := writeTree(t, map[string]string{"nodes.json": shapesNodes, "svc.json": shapesServices, "ep.yaml": shapesEndpoints})
	_, _, err := Import([]string{dir}, Options{Namespaces: []string{"shop"}})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "the cut leaves no Service") || !strings.Contains(err.Error(), "namespaces default") {
		t.Fatalf("import -n shop = %v, want an input error naming namespace default", err)
	}
	// Negative control: the namespace the input has keeps web.
	if _, _, err := Import([]string{dir}, Options{Namespaces: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
}

// TestImportPortNumbers: a node port outside 30000-32767 (a cluster with its
// own --service-node-port-range) widens the file's nodePortRange, said in a
// note, and the topology takes it; a port no cluster could hold is an input
// error naming the file, the Service and the field.
func TestImportPortNumbers(t *testing.T) {
	nodePort := strings.Replace(shapesServices, `"type": "ClusterIP",
  "ports": [{"name": "http", "port": 80,`, `"type": "NodePort",
  "ports": [{"name": "http", "port": 80, "nodePort": 40080,`, 1)
	if nodePort == shapesServices {
		t.Fatal("the edit did not apply")
	}
	dir := writeTree(t, map[string]string{"nodes.json": shapesNodes, "svc.json": nodePort, "ep.yaml": shapesEndpoints})
	data, res, err := Import([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Parse("imported", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if topo.NodePortRange.String() != "30000-40080" || !strings.Contains(strings.Join(res.Notes, "\n"), "nodePortRange 30000-40080") {
		t.Errorf("nodePortRange %s, notes %q", topo.NodePortRange, res.Notes)
	}

	bad := strings.Replace(shapesServices, `"port": 80,`, `"port": 70000,`, 1)
	dir = writeTree(t, map[string]string{"nodes.json": shapesNodes, "svc.json": bad})
	_, _, err = Import([]string{dir}, Options{})
	var ie *InputError
	want := filepath.Join(dir, "svc.json") + ":items[0] (Service default/web): spec.ports[0].port: 70000 is not a port number"
	if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("port 70000: %v, want an input error starting %q", err, want)
	}
}

// TestImportManifest: seed 002's manifests, which no cluster ran, become the
// lab the article shows: two nodes made, the Deployment's three pods spread
// over them, the Service's ClusterIP allocated from serviceCIDR and its three
// endpoints derived from its selector on port 80; each invention is noted.
func TestImportManifest(t *testing.T) {
	data, res, err := Import([]string{"testdata/seed002/manifest.yaml"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Parse("imported", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	svc, ok := topo.Service("default", "service-httpd")
	if !ok || !topo.ServiceCIDR.Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) || svc.Spec.Ports[0].NodePort != 32000 {
		t.Fatalf("service-httpd: %+v", svc.Spec)
	}
	if len(topo.Nodes) != 2 || len(topo.Pods) != 3 {
		t.Errorf("%d nodes, %d pods; want 2 and 3", len(topo.Nodes), len(topo.Pods))
	}
	nodes := map[string]int{}
	for _, p := range topo.Pods {
		nodes[p.Node]++
	}
	if nodes["node-1"] != 2 || nodes["node-2"] != 1 {
		t.Errorf("pods per node %v, want 2 on node-1 and 1 on node-2", nodes)
	}
	if got := endpointsOf(t, data); strings.Count(got, " ready") != 3 || !strings.Contains(got, "TCP 80") {
		t.Errorf("endpoints %q, want three ready on port 80", got)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{"made node-1 and node-2", "made 3 pods of its 1 workloads", "Service default/service-httpd: no ClusterIP in the input: the lab allocates one"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}
