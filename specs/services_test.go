package specs

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

// servicesLab is seed 000's cluster grown to show every claim of the seeds: three
// nodes (node-3 has no backend), backends web-1 and web-2, a client pod on each of
// the first two nodes, an outside client, and Services for each behaviour.
const servicesLab = `
name: svc
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
  - {name: node-3, ip: 192.168.1.12, podCIDR: 10.244.3.0/24}
pods:
  - name: web-1
    node: node-1
    ip: 10.244.1.10
    labels: {app: web}
    ports:
      - {name: http, containerPort: 8080}
      - {name: metrics, containerPort: 9100}
      - {name: dns, containerPort: 5353, protocol: UDP}
  - name: web-2
    node: node-2
    ip: 10.244.2.10
    labels: {app: web}
    ports:
      - {name: http, containerPort: 8080}
      - {name: metrics, containerPort: 9100}
      - {name: dns, containerPort: 5353, protocol: UDP}
  - name: alt-1
    node: node-1
    ip: 10.244.1.20
    labels: {app: alt}
    ports: [{name: web, containerPort: 8081}]
  - name: alt-2
    node: node-2
    ip: 10.244.2.20
    labels: {app: alt}
    ports: [{name: web, containerPort: 9090}]
  - {name: client-1, node: node-1, ip: 10.244.1.5}
  - {name: client-2, node: node-2, ip: 10.244.2.5}
clients:
  - {name: outside, ip: 192.168.1.100}
services:
  - apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec:
      type: NodePort
      clusterIP: 10.96.123.45
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
  - apiVersion: v1
    kind: Service
    metadata: {name: web-local}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
      clusterIP: 10.96.123.46
      selector: {app: web}
      healthCheckNodePort: 32100
      ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30081}]
  - apiVersion: v1
    kind: Service
    metadata: {name: alt}
    spec:
      clusterIP: 10.96.123.47
      selector: {app: alt}
      ports: [{name: http, port: 80, targetPort: web}]
  - apiVersion: v1
    kind: Service
    metadata: {name: multi}
    spec:
      clusterIP: 10.96.123.48
      selector: {app: web}
      ports:
        - {name: http, port: 80, targetPort: http}
        - {name: metrics, port: 9100, targetPort: metrics}
        - {name: dns, port: 53, targetPort: dns, protocol: UDP}
  - apiVersion: v1
    kind: Service
    metadata: {name: empty}
    spec:
      type: NodePort
      clusterIP: 10.96.123.49
      selector: {app: nothing}
      ports:
        - {name: http, port: 80, targetPort: 8080, nodePort: 30090}
        - {name: dns, port: 53, targetPort: 5353, protocol: UDP, nodePort: 30091}
`

// backendsSeen makes new connections until every backend in want answered, and
// fails on any other answer or error. The bound on attempts makes missing a backend
// that the rules pick with probability 1/len(want) less likely than 1e-6.
func backendsSeen(l *lab.Lab, from, proto, to string, want ...string) map[string]traffic.Reply {
	seen := map[string]traffic.Reply{}
	limit := 20 * len(want) * len(want)
	for i := 0; i < limit && len(seen) < len(want); i++ {
		r, err := traffic.Request(dial(l, from, proto, to, 2*time.Second))
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), "%s from %s to %s", proto, from, to)
		ExpectWithOffset(1, r.Pod).To(BeElementOf(want), "%s from %s to %s", proto, from, to)
		seen[r.Pod] = r
	}
	ExpectWithOffset(1, seen).To(HaveLen(len(want)), "every backend answers %s from %s to %s", proto, from, to)
	return seen
}

var _ = Describe("Services", func() {
	for _, m := range modes {
		Context(m.label, Ordered, Label(m.label, "services"), func() {
			var l *lab.Lab
			BeforeAll(func() {
				l = upLab(parse("services.yaml", servicesLab), m.options())
			})
			dumpOnFailure(&l)

			Describe("ClusterIP", Label("clusterip"), func() {
				DescribeTable("reaches every backend, port 80 -> targetPort 8080, and the backend sees the pod's own address",
					func(from, src string) {
						for _, r := range backendsSeen(l, from, "TCP", "10.96.123.45:80", "web-1", "web-2") {
							Expect(r.Addr.Port()).To(BeEquivalentTo(8080))
							Expect(r.Client.Addr().String()).To(Equal(src))
						}
					},
					Entry("from a pod on node-1", "client-1", "10.244.1.5"),
					Entry("from a pod on node-2", "client-2", "10.244.2.5"),
				)

				It("reaches every backend from a node's own process (the OUTPUT chain), masqueraded", func() {
					seen := backendsSeen(l, "node-1", "TCP", "10.96.123.45:80", "web-1", "web-2")
					Expect(seen["web-1"].Client.Addr().String()).To(Equal("10.244.1.1"), "local backend: node-1's cni0 address")
					Expect(seen["web-2"].Client.Addr().String()).To(Equal("192.168.1.10"), "remote backend: node-1's eth0 address")
				})

				It("hairpins a backend to its own Service, masqueraded to its node", func() {
					Eventually(func(g Gomega) {
						r, err := ask(l, "web-1", "10.96.123.45:80")
						g.Expect(err).NotTo(HaveOccurred())
						g.Expect(r.Pod).To(Equal("web-1"))
						g.Expect(r.Client.Addr().String()).To(Equal("10.244.1.1"),
							"without masquerade the reply would go straight back to web-1's own socket")
					}).WithTimeout(20 * time.Second).WithPolling(time.Millisecond).Should(Succeed())
				})

				It("resolves a named targetPort per pod", func() {
					seen := backendsSeen(l, "client-1", "TCP", "10.96.123.47:80", "alt-1", "alt-2")
					Expect(seen["alt-1"].Addr.String()).To(Equal("10.244.1.20:8081"))
					Expect(seen["alt-2"].Addr.String()).To(Equal("10.244.2.20:9090"))
				})

				It("serves every port of a multi-port Service, TCP and UDP", func() {
					for _, r := range backendsSeen(l, "client-1", "TCP", "10.96.123.48:80", "web-1", "web-2") {
						Expect(r.Addr.Port()).To(BeEquivalentTo(8080))
					}
					for _, r := range backendsSeen(l, "client-1", "TCP", "10.96.123.48:9100", "web-1", "web-2") {
						Expect(r.Addr.Port()).To(BeEquivalentTo(9100))
					}
					for _, r := range backendsSeen(l, "client-1", "UDP", "10.96.123.48:53", "web-1", "web-2") {
						Expect(r.Addr.Port()).To(BeEquivalentTo(5353))
						Expect(r.Protocol).To(Equal("UDP"))
					}
				})

				It("does not translate a port the Service does not declare", func() {
					// 8080 is the backends' port, but not the Service's.
					out := outcome(l, "client-1", "TCP", "10.96.123.45:8080", time.Second)
					Expect(out).NotTo(Equal(traffic.Answered))
				})
			})

			Describe("NodePort", Label("nodeport"), func() {
				DescribeTable("answers an outside client on every node, masqueraded to that node",
					func(node, addr, localSrc string) {
						seen := backendsSeen(l, "outside", "TCP", addr+":30080", "web-1", "web-2")
						for pod, r := range seen {
							if r.Node == node {
								Expect(r.Client.Addr().String()).To(Equal(localSrc), pod)
							} else {
								Expect(r.Client.Addr().String()).To(Equal(addr), pod)
							}
						}
					},
					Entry("node-1 (has web-1)", "node-1", "192.168.1.10", "10.244.1.1"),
					Entry("node-2 (has web-2)", "node-2", "192.168.1.11", "10.244.2.1"),
					Entry("node-3 (no backend)", "node-3", "192.168.1.12", ""),
				)

				It("answers on the node's localhost too (kube-proxy's localhostNodePorts), in iptables mode only", func() {
					switch m.model() {
					case proxy.ModelIPVS:
						// IPVS mode never served NodePorts on 127.0.0.1; kube-proxy refuses
						// localhostNodePorts there.
						Expect(outcome(l, "node-3", "TCP", "127.0.0.1:30080", time.Second)).NotTo(Equal(traffic.Answered))
						return
					case proxy.ModelNFTables:
						// kube-proxy's nftables mode does not serve NodePorts on
						// localhost (KEP-3866): nothing translates 127.0.0.1, and
						// nothing listens there.
						Expect(outcome(l, "node-3", "TCP", "127.0.0.1:30080", time.Second)).To(Equal(traffic.Refused))
						return
					}
					backendsSeen(l, "node-3", "TCP", "127.0.0.1:30080", "web-1", "web-2")
				})
			})

			Describe("externalTrafficPolicy Local", Label("local"), func() {
				It("keeps the outside client's address on nodes with a local endpoint", func() {
					for _, tc := range []struct{ node, pod string }{{"192.168.1.10", "web-1"}, {"192.168.1.11", "web-2"}} {
						for i := 0; i < 10; i++ {
							r, err := ask(l, "outside", tc.node+":30081")
							Expect(err).NotTo(HaveOccurred())
							Expect(r.Pod).To(Equal(tc.pod), "only the local endpoint")
							Expect(r.Client.Addr().String()).To(Equal("192.168.1.100"), "the client's own address")
						}
					}
				})

				It("drops (times out, not refused) on a node without a local endpoint", func() {
					for i := 0; i < 2; i++ {
						Expect(outcome(l, "outside", "TCP", "192.168.1.12:30081", time.Second)).To(Equal(traffic.Timeout))
					}
				})

				It("reports local endpoints on the health check node port: 200 with a count, 503 without", func() {
					for _, tc := range []struct {
						node  string
						code  int
						count int
					}{{"192.168.1.10", 200, 1}, {"192.168.1.11", 200, 1}, {"192.168.1.12", 503, 0}} {
						code, body := httpGet(l, "outside", fmt.Sprintf("http://%s:32100/", tc.node))
						Expect(code).To(Equal(tc.code), tc.node)
						var health struct {
							Service        struct{ Namespace, Name string }
							LocalEndpoints int
						}
						Expect(json.Unmarshal([]byte(body), &health)).To(Succeed(), body)
						Expect(health.LocalEndpoints).To(Equal(tc.count), tc.node)
						Expect(health.Service.Name).To(Equal("web-local"))
					}
				})

				It("still masquerades policy Cluster: the backend sees a node address", func() {
					for _, r := range backendsSeen(l, "outside", "TCP", "192.168.1.12:30080", "web-1", "web-2") {
						Expect(r.Client.Addr().String()).To(Equal("192.168.1.12"))
					}
				})
			})

			Describe("a Service without endpoints", Label("reject"), func() {
				DescribeTable("refuses at once instead of timing out",
					func(from, proto, to string) {
						// A timeout would be classified Timeout: Refused is the answer.
						Expect(refusal(l, from, proto, to)).To(Equal(traffic.Refused))
					},
					Entry("TCP ClusterIP from a pod", "client-1", "TCP", "10.96.123.49:80"),
					Entry("UDP ClusterIP from a pod", "client-1", "UDP", "10.96.123.49:53"),
					Entry("TCP ClusterIP from a node", "node-2", "TCP", "10.96.123.49:80"),
					Entry("TCP NodePort from outside", "outside", "TCP", "192.168.1.11:30090"),
				)
			})
		})
	}
})

// httpGet fetches a URL from inside a lab member.
func httpGet(l *lab.Lab, from, url string) (int, string) {
	resp, err := traffic.HTTPClient(netnsOf(l, from), 2*time.Second).Get(url)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}
