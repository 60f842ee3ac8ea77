package specs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// topologies/lb.yaml's addresses: the pool hands out 192.168.1.241 on.
const (
	lbLocalIP   = "192.168.1.241" // web-local, externalTrafficPolicy Local
	lbClusterIP = "192.168.1.242" // web-cluster, policy Cluster
	lbRangedIP  = "192.168.1.243" // web-ranged, Local, source range 192.168.1.96/28
)

// The load balancer of topologies/lb.yaml in front of each mode's nodes: the e2e
// test "should only allow access from service loadbalancer source ranges"
// (test/e2e/network/loadbalancer.go, GCE/GKE/AWS/Azure only) in a lab, the client
// address kept end to end with policy Local, the health check as kube-proxy
// serves it, one client's flows spread over the nodes, and a node withdrawn when
// its last local endpoint goes, with the failed connections of that window
// counted.
var _ = Describe("A load balancer in front of the nodes", Label("loadbalancer"), func() {
	for _, m := range modes {
		Context(m.label, Ordered, Label(m.label), func() {
			var l *lab.Lab
			var root string
			dumpOnFailure(&l)
			BeforeAll(func() {
				var err error
				root, err = rootSnapshot()
				Expect(err).NotTo(HaveOccurred())
				l = upLab(shipped("lb.yaml"), m.options())
			})

			It("answers a client inside loadBalancerSourceRanges with its own address and drops one outside", Label("sourceranges"), func() {
				to := lbRangedIP + ":80"
				seen := backendsSeen(l, "office", "TCP", to, "web-1", "web-2")
				for _, r := range seen {
					Expect(r.Client.Addr().String()).To(Equal("192.168.1.100"), "policy Local: the pod sees the client")
				}
				for i := 0; i < 2; i++ {
					Expect(outcome(l, "outside", "TCP", to, time.Second)).To(Equal(traffic.Timeout), "192.168.1.200 is outside 192.168.1.96/28: dropped, not refused")
				}
				// The node's rules do the filtering: the load balancer sends both
				// clients' packets on alike.
				Expect(lbRoute(l, lbRangedIP)).To(ConsistOf("192.168.1.10", "192.168.1.11"))
			})

			It("keeps the client's address end to end with policy Local, through the nodes with a local endpoint only", Label("local"), func() {
				lbRoutes(l, lbLocalIP).Should(ConsistOf("192.168.1.10", "192.168.1.11"), "node-3 has no web pod: its health check answers 503")
				for _, r := range backendsSeen(l, "outside", "TCP", lbLocalIP+":80", "web-1", "web-2") {
					Expect(r.Client.Addr().String()).To(Equal("192.168.1.200"))
				}
				// Policy Cluster takes every node, and masquerades.
				lbRoutes(l, lbClusterIP).Should(ConsistOf("192.168.1.10", "192.168.1.11", "192.168.1.12"))
			})

			It("is told by the health check node port what kube-proxy says: its JSON body and endpoint weight", Label("healthcheck"), func() {
				svc, _ := l.Topology().Service("default", "web-local")
				hc := svc.Spec.HealthCheckNodePort
				for _, tc := range []struct {
					node  string
					code  int
					count int
				}{{"192.168.1.10", http.StatusOK, 1}, {"192.168.1.12", http.StatusServiceUnavailable, 0}} {
					resp, err := traffic.HTTPClient(netnsOf(l, "lb"), 2*time.Second).Get(fmt.Sprintf("http://%s:%d/", tc.node, hc))
					Expect(err).NotTo(HaveOccurred())
					body := readAll(resp)
					Expect(resp.StatusCode).To(Equal(tc.code), tc.node)
					Expect(resp.Header.Get("X-Load-Balancing-Endpoint-Weight")).To(Equal(fmt.Sprint(tc.count)), tc.node)
					Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
					// pkg/proxy/healthcheck/service_health.go's hcHandler, byte for byte.
					Expect(body).To(Equal(fmt.Sprintf("{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"web-local\"\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": true\n}", tc.count)))
				}
			})

			// Statistical: with the 5-tuple hash, 40 connections from fresh source
			// ports all take one of three nodes with probability 3 x 3^-40 (about
			// 2e-19). Negative control: with an address-only hash
			// (fib_multipath_hash_policy 0) every one takes the same node.
			It("spreads one client's connections over the nodes by their ports; an address-only hash sends them all to one", Label("ecmp"), func() {
				Expect(entryNodes(l, 40)).To(HaveLen(3), "policy Cluster: three healthy nodes, flows hashed by their ports")
				lbNS := netnsOf(l, "lb")
				Expect(namespaces.Sysctl(lbNS, []namespaces.Setting{{Key: "net.ipv4.fib_multipath_hash_policy", Value: "0"}})).To(Succeed())
				DeferCleanup(namespaces.Sysctl, lbNS, []namespaces.Setting{{Key: "net.ipv4.fib_multipath_hash_policy", Value: "3"}})
				Expect(entryNodes(l, 40)).To(HaveLen(1), "the same source and destination address: the same next hop")
			})

			It("leaves the root network namespace alone while the load balancer probes and routes", func() {
				now, err := rootSnapshot()
				Expect(err).NotTo(HaveOccurred())
				Expect(rootChanges(root, now)).To(BeEmpty())
			})

			// The Cluster and Local withdrawals assert behaviour only: which node
			// is routed when, and which connections fail after. The length of the
			// window and its failures are reported, never held to a figure.
			It("withdraws a node whose last local endpoint goes within two probe rounds, counting the failed connections in between (policy Local)", Label("withdrawal"), func() {
				w := withdraw(l, lbLocalIP, true)
				report(m.label+" Local", w)
				Expect(w.withdrawn).To(BeTrue(), "node-1 leaves the route")
				Expect(w.roundsLate).To(BeNumerically("<=", 2), "withdrawn by the end of the first probe round to start after the health check turned 503")
				Expect(w.after.failed).To(BeZero(), "after the withdrawal every connection goes to node-2 (%v)", w.after.failures)
				Expect(w.after.ok).To(BeNumerically(">", 0))
				Expect(w.clients).To(ConsistOf("192.168.1.200"), "policy Local: the client's address throughout")
			})

			It("loses no connection when a node's last local endpoint goes with policy Cluster", Label("withdrawal"), func() {
				w := withdraw(l, lbClusterIP, false)
				report(m.label+" Cluster", w)
				Expect(w.withdrawn).To(BeFalse(), "policy Cluster: every node stays")
				Expect(w.during.failed+w.after.failed).To(BeZero(), "node-1 sends its share on to node-2 (%v %v)", w.during.failures, w.after.failures)
				Expect(w.during.ok).To(BeNumerically(">", 0))
			})

			// Negative control of the two counts above: with its probes stopped, the
			// load balancer keeps sending node-1 its share of new connections after
			// node-1's last local endpoint went, and the count must see them fail.
			// A connection takes node-1 with chance 1/2 (two next hops, 5-tuple
			// hash, its SYNs sent again on the same path): 24 connections all
			// miss it with probability 2^-24 (6e-8).
			It("negative control: a load balancer that stops probing keeps the node, and the same count sees its failures", Label("withdrawal"), func() {
				b, err := l.LoadBalancers().Balancer("lb")
				Expect(err).NotTo(HaveOccurred())
				Eventually(func() []string { return b.NextHops(netip.MustParseAddr(lbLocalIP)) }).WithTimeout(10 * b.Interval()).Should(ContainElement("node-1"))
				b.Pause(true)
				DeferCleanup(b.Pause, false)
				// The container's last spec: web-1 stays unready, the lab goes
				// with the container (a sync spared, half a minute in the VM).
				setReady(l, "default/web-1", false)
				res := connect(l, "outside", lbLocalIP+":80", 24)
				Expect(res.failed).To(BeNumerically(">", 0), "connections hashed to node-1 find no local endpoint there")
				Expect(res.ok).To(BeNumerically(">", 0), "connections hashed to node-2 are answered")
				Expect(lbRoute(l, lbLocalIP)).To(ConsistOf("192.168.1.10", "192.168.1.11"))
			})
		})
	}
})

// A lab that had no load balancer gets one when its first LoadBalancer Service
// is applied, as a cluster's cloud controller provisions one, and gives it back
// with the lab.
var _ = Describe("A running lab's first LoadBalancer Service", Label("loadbalancer"), func() {
	var l *lab.Lab
	dumpOnFailure(&l)
	for _, m := range modes {
		It("gets a load balancer member, an ingress IP and routes to it, "+m.label, Label(m.label), func() {
			l = upLab(shipped("web.yaml"), m.options())
			_, err := l.Member("lb")
			Expect(err).To(HaveOccurred(), "web.yaml has no LoadBalancer Service")
			svc, _ := l.Topology().Service("default", "web")
			svc.Spec.Type = corev1.ServiceTypeLoadBalancer
			Expect(l.ApplyService(ctx(), svc)).To(Succeed())
			lbm, err := l.Member("lb")
			Expect(err).NotTo(HaveOccurred())
			Expect(lbm.Kind).To(Equal(member.KindLoadBalancer))
			svc, _ = l.Topology().Service("default", "web")
			Expect(svc.Status.LoadBalancer.Ingress).To(HaveLen(1))
			ip := svc.Status.LoadBalancer.Ingress[0].IP
			lbRoutes(l, ip).Should(ConsistOf("192.168.1.10", "192.168.1.11"))
			for _, r := range backendsSeen(l, "outside", "TCP", ip+":80", "web-a", "web-b") {
				Expect(r.Client.Addr().String()).To(BeElementOf("192.168.1.10", "192.168.1.11", "10.244.1.1", "10.244.2.1"), "policy Cluster: a node's address")
			}
		})
	}
})

// lbRoutes polls lbRoute for Eventually, with the time a loaded machine needs: a
// node's health check that did not answer the load balancer's first probe round
// in time (a probe waits one interval) leaves it out until a later round does.
func lbRoutes(l *lab.Lab, ip string) AsyncAssertion {
	return Eventually(func() []string { return lbRoute(l, ip) }).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond)
}

// lbRoute lists the next hops of the load balancer's route to ip, as the kernel
// holds it (`ip route` in its namespace).
func lbRoute(l *lab.Lab, ip string) []string {
	out, err := namespaces.Output(netnsOf(l, "lb"), "ip", "-4", "route", "show", ip+"/32")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var hops []string
	for _, f := range strings.Fields(string(out)) {
		if a, err := netip.ParseAddr(f); err == nil && a.String() != ip {
			hops = append(hops, f)
		}
	}
	return hops
}

// entryNodes makes n connections from outside to web-cluster's ingress IP and
// returns the nodes they entered at, which policy Cluster's masquerade names: a
// backend sees the node's eth0 address, or its cni0 address when it runs there.
func entryNodes(l *lab.Lab, n int) []string {
	byAddr := map[string]string{}
	for _, node := range l.Topology().Nodes {
		byAddr[node.IP.String()] = node.Name
		byAddr[node.Gateway().String()] = node.Name
	}
	var nodes []string
	for i := 0; i < n; i++ {
		r, err := ask(l, "outside", lbClusterIP+":80")
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		node, ok := byAddr[r.Client.Addr().String()]
		ExpectWithOffset(1, ok).To(BeTrue(), "source %s is no node's", r.Client.Addr())
		if !slices.Contains(nodes, node) {
			nodes = append(nodes, node)
		}
	}
	return nodes
}

// clientTimeout is how long a client gives a new connection: TCP sends an
// unanswered SYN again after one second and again two seconds later, so a
// connection fails only when all three went where they are dropped, while one
// that gets through on a second SYN is answered late.
const clientTimeout = 5 * time.Second

// counts are new connections answered and failed, and of those answered, the
// ones answered only after a SYN was sent again (a second or more).
type counts struct {
	ok, failed, late int
	failures         []string
}

// withdrawal is what a withdraw saw.
type withdrawal struct {
	// synced is how long the change took to reach every node's rules and
	// health checks (kube-proxy's sync); from then on node-1's checks answer
	// 503.
	synced time.Duration
	// withdrawn tells whether node-1 left the route; took is how long after
	// the change, and roundsLate how many probe rounds after the one under way
	// when the sync ended (0: during the sync).
	withdrawn  bool
	took       time.Duration
	roundsLate int64
	interval   time.Duration
	// during counts connections from the change to the withdrawal (to three
	// probe intervals after the change when there was none); after, twenty
	// or more started after it.
	during, after counts
	// clients are the source addresses the backends saw.
	clients []string
}

// withdraw makes new connections from outside to ip, from two clients at once,
// while web-1, the only web endpoint on node-1, stops being
// ready (node-1's health checks then answer 503), and follows the load
// balancer's route until node-1 leaves it (policy Local) or for three probe
// intervals (policy Cluster). Readiness and route are restored when the spec
// ends.
func withdraw(l *lab.Lab, ip string, local bool) withdrawal {
	b, err := l.LoadBalancers().Balancer("lb")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	addr := netip.MustParseAddr(ip)
	ExpectWithOffset(1, b.NextHops(addr)).To(ContainElement("node-1"))
	w := withdrawal{interval: b.Interval()}

	var mu sync.Mutex
	var phase *counts
	clients := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// A connection counts in the phase it started in.
				mu.Lock()
				at := phase
				mu.Unlock()
				began := time.Now()
				r, err := traffic.Request(dial(l, "outside", "TCP", ip+":80", clientTimeout))
				took := time.Since(began)
				mu.Lock()
				if phase := at; phase != nil {
					if err != nil {
						phase.failed++
						if len(phase.failures) < 5 {
							phase.failures = append(phase.failures, string(traffic.Classify(err)))
						}
					} else {
						phase.ok++
						if took >= 900*time.Millisecond {
							phase.late++
						}
						clients[r.Client.Addr().String()] = true
					}
				}
				mu.Unlock()
				// About fifty new connections a second per client, so that
				// the load leaves the nodes time to sync and answer probes on
				// a slow machine too.
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	time.Sleep(w.interval / 2)
	mu.Lock()
	phase = &w.during
	mu.Unlock()
	start := time.Now()
	setReady(l, "default/web-1", false)
	w.synced = time.Since(start)
	synced := int64(b.Rounds())
	if local {
		// The rounds are counted from the one under way when node-1's health
		// check turned 503. svclab's proxiers turn it before setReady returns;
		// the real kube-proxy turns it at the end of its sync, after the rules
		// the lab waits for, and under TCG with specs beside it a probe round
		// or more later (kube-proxy-ipvs counted 3 rounds from setReady).
		svc, _ := l.Topology().Service("default", "web-local")
		hc := fmt.Sprintf("http://192.168.1.10:%d/", svc.Spec.HealthCheckNodePort)
		Eventually(func() int {
			resp, err := traffic.HTTPClient(netnsOf(l, "lb"), 2*time.Second).Get(hc)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}).WithTimeout(time.Minute).WithPolling(10*time.Millisecond).Should(Equal(http.StatusServiceUnavailable), "node-1's health check %s", hc)
		synced = int64(b.Rounds())
	}
	DeferCleanup(func() {
		setReady(l, "default/web-1", true)
		Eventually(func() []string { return b.NextHops(addr) }).WithTimeout(10 * w.interval).Should(ContainElement("node-1"))
	})
	// Policy Local must see the withdrawal (a generous bound, for slow
	// machines: the rounds are what is asserted); policy Cluster is watched
	// for three probe intervals.
	watch := 3 * w.interval
	if local {
		watch = 30 * w.interval
	}
	deadline := time.Now().Add(watch)
	for time.Now().Before(deadline) {
		if !slices.Contains(b.NextHops(addr), "node-1") {
			w.withdrawn = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if w.withdrawn {
		for _, c := range b.Changes() {
			if c.IP == addr && c.At.After(start) && !slices.Contains(c.Nodes, "node-1") {
				w.took, w.roundsLate = c.At.Sub(start), max(int64(c.Round)-synced, 0)
				break
			}
		}
	}
	mu.Lock()
	phase = &w.after
	mu.Unlock()
	// Until twenty connections started after the withdrawal (or the client
	// timeout twice over: a client may still wait on one of the window).
	Eventually(func() int {
		mu.Lock()
		defer mu.Unlock()
		return w.after.ok + w.after.failed
	}).WithTimeout(2 * clientTimeout).WithPolling(10 * time.Millisecond).Should(BeNumerically(">=", 20))
	mu.Lock()
	phase = nil
	for c := range clients {
		w.clients = append(w.clients, c)
	}
	mu.Unlock()
	return w
}

func report(name string, w withdrawal) {
	s := fmt.Sprintf("withdrawal %s (probe interval %s): the sync took %s; ", name, w.interval, w.synced.Round(time.Millisecond))
	if w.withdrawn {
		s += fmt.Sprintf("node-1 withdrawn %s after the change (%d probe rounds after the one under way when the health checks turned 503); ",
			w.took.Round(time.Millisecond), w.roundsLate)
	} else {
		s += "node-1 kept throughout; "
	}
	s += fmt.Sprintf("%d of %d new connections failed from the change to the withdrawal (%v) and %d were answered only after a SYN was sent again; %d of %d failed after",
		w.during.failed, w.during.ok+w.during.failed, w.during.failures, w.during.late, w.after.failed, w.after.ok+w.after.failed)
	AddReportEntry(s)
	GinkgoWriter.Println(s)
}

// connect makes n new connections from a member to an address, twelve at a
// time, each given clientTimeout as withdraw's are.
func connect(l *lab.Lab, from, to string, n int) counts {
	var mu sync.Mutex
	var res counts
	var wg sync.WaitGroup
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				_, err := traffic.Request(dial(l, from, "TCP", to, clientTimeout))
				mu.Lock()
				if err != nil {
					res.failed++
				} else {
					res.ok++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

// setReady sets a pod's Ready condition, as the kubelet does when its readiness
// probe changes.
func setReady(l *lab.Lab, pod string, ready bool) {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ExpectWithOffset(1, l.UpdatePod(c, pod, func(p *topology.Pod) { p.Ready = ready })).To(Succeed())
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(b)
}
