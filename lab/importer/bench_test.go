package importer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// largeDump writes what `kubectl get nodes,services,endpointslices -A -o json`
// prints of a cluster of n ClusterIP Services with two endpoints each on
// three nodes, with the metadata kubectl prints (uid, resourceVersion,
// annotations), and returns its path.
func largeDump(tb testing.TB, n int) string {
	var items []any
	for i := 1; i <= 3; i++ {
		items = append(items, map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": fmt.Sprintf("node-%d", i)},
			"spec":     map[string]any{"podCIDR": fmt.Sprintf("10.244.%d.0/24", i)},
			"status":   map[string]any{"addresses": []any{map[string]any{"type": "InternalIP", "address": fmt.Sprintf("192.168.1.%d", 10+i)}}}})
	}
	meta := func(name string) map[string]any {
		return map[string]any{"name": name, "namespace": "default", "uid": "6c1f9a52-1b0e-4c4e-9d55-0f0a3a8b1c11", "resourceVersion": "12345",
			"creationTimestamp": "2026-12-01T00:00:00Z", "annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`}}
	}
	for i := range n {
		ip := fmt.Sprintf("10.96.%d.%d", i/250+1, i%250+1)
		svc := map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": meta(fmt.Sprintf("svc-%d", i)),
			"spec": map[string]any{"selector": map[string]any{"app": fmt.Sprintf("svc-%d", i)}, "clusterIP": ip, "clusterIPs": []any{ip}, "type": "ClusterIP",
				"ports": []any{map[string]any{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}}}}
		var eps []any
		for j := range 2 {
			node := (i+j)%3 + 1
			eps = append(eps, map[string]any{"addresses": []any{fmt.Sprintf("10.244.%d.%d", node, (2*i+j)%250+2)},
				"conditions": map[string]any{"ready": true, "serving": true, "terminating": false}, "nodeName": fmt.Sprintf("node-%d", node)})
		}
		sm := meta(fmt.Sprintf("svc-%d-x7k2p", i))
		sm["labels"] = map[string]any{"kubernetes.io/service-name": fmt.Sprintf("svc-%d", i)}
		items = append(items, svc, map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": sm, "addressType": "IPv4",
			"endpoints": eps, "ports": []any{map[string]any{"name": "http", "port": 8080, "protocol": "TCP"}}})
	}
	data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "    ")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "cluster.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkImport10k: a 10,000-Service dump (about 30 MB as kubectl prints
// it), imported and checked; it reports the bytes allocated per input byte
// and the heap in use after the import, where memory goes.
func BenchmarkImport10k(b *testing.B) {
	path := largeDump(b, 10000)
	st, _ := os.Stat(path)
	b.ResetTimer()
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, _, err := Import([]string{path}, Options{}); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(st.Size()), "alloc-bytes/input-byte")
		b.ReportMetric(float64(after.HeapSys>>20), "heap-sys-MiB")
	}
}
