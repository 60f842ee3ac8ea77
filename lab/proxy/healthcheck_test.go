package proxy

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/traffic"
)

// nsClient is an HTTP client whose connections are opened inside the namespace ns:
// the client of these tests sits on the node, as a cloud load balancer's probe
// reaches the node's own address.
func nsClient(ns string) *http.Client { return traffic.HTTPClient(ns, 5*time.Second) }

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestHealthServer(t *testing.T) {
	ns := nstest.New(t, "serves health checks").Name
	hs, err := NewHealthServer(namespaces.Path(ns), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	c := nsClient(ns)

	edge := ServicePort{
		Name:      ServicePortName{Namespace: "default", Name: "edge", Port: "http"},
		Protocol:  corev1.ProtocolTCP,
		ClusterIP: netip.MustParseAddr("10.96.0.80"), Port: 80, NodePort: 30081,
		ExternalLocal: true, HealthCheckNodePort: 32000,
		Endpoints: []Endpoint{
			{IP: netip.MustParseAddr("10.244.1.20"), Port: 8080, NodeName: "node-1", Ready: true, Serving: true},
			{IP: netip.MustParseAddr("10.244.2.20"), Port: 8080, NodeName: "node-2", Ready: true, Serving: true},
		},
	}
	// A second port of the same Service, on the same endpoint address: kube-proxy
	// counts addresses, so still one local endpoint.
	edgeTLS := edge
	edgeTLS.Name.Port, edgeTLS.Port, edgeTLS.NodePort = "https", 443, 30443
	edgeTLS.Endpoints = []Endpoint{{IP: netip.MustParseAddr("10.244.1.20"), Port: 8443, NodeName: "node-1", Ready: true, Serving: true}}

	if err := hs.Update([]ServicePort{edge, edgeTLS}); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, c, "http://127.0.0.1:32000/")
	wantBody := "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"edge\"\n\t},\n\t\"localEndpoints\": 1,\n\t\"serviceProxyHealthy\": true\n}"
	if resp.StatusCode != 200 || body != wantBody {
		t.Errorf("with a local endpoint: %d %q, want 200 %q", resp.StatusCode, body, wantBody)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "X-Content-Type-Options": "nosniff", "X-Load-Balancing-Endpoint-Weight": "1"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}

	// The local endpoint terminates: it may still serve, but the check fails so the
	// load balancer drains the node.
	draining := edge
	draining.Endpoints = slices.Clone(edge.Endpoints)
	draining.Endpoints[0].Ready, draining.Endpoints[0].Terminating = false, true
	if err := hs.Update([]ServicePort{draining}); err != nil {
		t.Fatal(err)
	}
	resp, body = get(t, c, "http://127.0.0.1:32000/")
	if resp.StatusCode != 503 || !strings.Contains(body, `"localEndpoints": 0`) || resp.Header.Get("X-Load-Balancing-Endpoint-Weight") != "0" {
		t.Errorf("without a ready local endpoint: %d %q", resp.StatusCode, body)
	}

	// kube-proxy's own health.
	resp, body = get(t, c, "http://127.0.0.1:10256/healthz")
	var health struct {
		Healthy      bool  `json:"healthy"`
		NodeEligible *bool `json:"nodeEligible"`
	}
	if err := json.Unmarshal([]byte(body), &health); err != nil || resp.StatusCode != 200 || !health.Healthy || health.NodeEligible == nil || !*health.NodeEligible {
		t.Errorf("/healthz: %d %s (%v)", resp.StatusCode, body, err)
	}

	// The Service loses its health check port: the listener goes.
	plain := edge
	plain.HealthCheckNodePort = 0
	if err := hs.Update([]ServicePort{plain}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("http://127.0.0.1:32000/"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after the port went away: %v, want connection refused", err)
	}

	if err := hs.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("http://127.0.0.1:10256/healthz"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after Close: %v, want connection refused", err)
	}
}
