package kubelet

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/topology"
)

// TestServiceEnv holds ServiceEnv to kubelet's rules: Services of the pod's
// namespace with a ClusterIP, plus default/kubernetes for every namespace unless
// the namespace has its own "kubernetes"; headless and ExternalName Services give
// nothing; names upper-cased with '-' as '_'.
func TestServiceEnv(t *testing.T) {
	svc := func(ns, name, ip string, ports ...corev1.ServicePort) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	port := func(name string, n int32, proto corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: n, Protocol: proto}
	}
	svcs := []corev1.Service{
		svc("default", "kubernetes", "10.96.0.1", port("https", 443, corev1.ProtocolTCP)),
		svc("default", "service-httpd", "10.101.20.80", port("", 8080, corev1.ProtocolTCP)),
		svc("default", "headless", corev1.ClusterIPNone, port("", 80, corev1.ProtocolTCP)),
		svc("default", "alias", ""),
		svc("kube-system", "kube-dns", "10.96.0.10", port("dns", 53, corev1.ProtocolUDP), port("dns-tcp", 53, corev1.ProtocolTCP)),
		svc("other", "kubernetes", "10.96.0.99", port("", 80, corev1.ProtocolTCP)),
	}
	want := map[string][]string{
		"default": {
			"KUBERNETES_PORT=tcp://10.96.0.1:443",
			"KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
			"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
			"KUBERNETES_PORT_443_TCP_PORT=443",
			"KUBERNETES_PORT_443_TCP_PROTO=tcp",
			"KUBERNETES_SERVICE_HOST=10.96.0.1",
			"KUBERNETES_SERVICE_PORT=443",
			"KUBERNETES_SERVICE_PORT_HTTPS=443",
			"SERVICE_HTTPD_PORT=tcp://10.101.20.80:8080",
			"SERVICE_HTTPD_PORT_8080_TCP=tcp://10.101.20.80:8080",
			"SERVICE_HTTPD_PORT_8080_TCP_ADDR=10.101.20.80",
			"SERVICE_HTTPD_PORT_8080_TCP_PORT=8080",
			"SERVICE_HTTPD_PORT_8080_TCP_PROTO=tcp",
			"SERVICE_HTTPD_SERVICE_HOST=10.101.20.80",
			"SERVICE_HTTPD_SERVICE_PORT=8080",
		},
		"kube-system": {
			"KUBERNETES_PORT=tcp://10.96.0.1:443",
			"KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
			"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
			"KUBERNETES_PORT_443_TCP_PORT=443",
			"KUBERNETES_PORT_443_TCP_PROTO=tcp",
			"KUBERNETES_SERVICE_HOST=10.96.0.1",
			"KUBERNETES_SERVICE_PORT=443",
			"KUBERNETES_SERVICE_PORT_HTTPS=443",
			"KUBE_DNS_PORT=udp://10.96.0.10:53",
			"KUBE_DNS_PORT_53_TCP=tcp://10.96.0.10:53",
			"KUBE_DNS_PORT_53_TCP_ADDR=10.96.0.10",
			"KUBE_DNS_PORT_53_TCP_PORT=53",
			"KUBE_DNS_PORT_53_TCP_PROTO=tcp",
			"KUBE_DNS_PORT_53_UDP=udp://10.96.0.10:53",
			"KUBE_DNS_PORT_53_UDP_ADDR=10.96.0.10",
			"KUBE_DNS_PORT_53_UDP_PORT=53",
			"KUBE_DNS_PORT_53_UDP_PROTO=udp",
			"KUBE_DNS_SERVICE_HOST=10.96.0.10",
			"KUBE_DNS_SERVICE_PORT=53",
			"KUBE_DNS_SERVICE_PORT_DNS=53",
			"KUBE_DNS_SERVICE_PORT_DNS_TCP=53",
		},
		// The namespace's own "kubernetes" wins over the master Service.
		"other": {
			"KUBERNETES_PORT=tcp://10.96.0.99:80",
			"KUBERNETES_PORT_80_TCP=tcp://10.96.0.99:80",
			"KUBERNETES_PORT_80_TCP_ADDR=10.96.0.99",
			"KUBERNETES_PORT_80_TCP_PORT=80",
			"KUBERNETES_PORT_80_TCP_PROTO=tcp",
			"KUBERNETES_SERVICE_HOST=10.96.0.99",
			"KUBERNETES_SERVICE_PORT=80",
		},
	}
	for ns, w := range want {
		if got := ServiceEnv(ns, svcs); !slices.Equal(got, w) {
			t.Errorf("namespace %s:\n got %s\nwant %s", ns, strings.Join(got, "\n     "), strings.Join(w, "\n     "))
		}
	}
}

// TestResolvConf: kubelet's ClusterFirst file: the cluster DNS alone, the
// cluster's search domains then the host's without repeats, ndots:5.
func TestResolvConf(t *testing.T) {
	d := &topology.DNS{Domain: "cluster.local", ServiceIP: netip.MustParseAddr("10.96.0.10")}
	host := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(host, []byte("search old.example\nnameserver 10.0.0.2\nsearch corp.example. cluster.local .\noptions edns0\n"), 0o644)
	searches, err := hostSearches(host)
	if err != nil {
		t.Fatal(err)
	}
	got := ResolvConf(d, "web", searches)
	want := "search web.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if s, err := hostSearches(filepath.Join(t.TempDir(), "none")); err != nil || s != nil {
		t.Errorf("a host without resolv.conf: %v, %v", s, err)
	}
}
