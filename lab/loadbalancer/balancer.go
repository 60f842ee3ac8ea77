// Package loadbalancer is a lab's load balancer at work: a member on the node
// network that routes each ingress IP it serves to nodes, packets untouched
// (passthrough, as GCP's load balancers and MetalLB behind a BGP router are),
// and picks those nodes the way real ones do. For externalTrafficPolicy Local
// it probes every node's healthCheckNodePort and keeps the nodes that answer
// 200; for Cluster, every node whose kube-proxy says it is healthy on /healthz
// (KEP-3836). The per-flow choice among them is the kernel's: one multipath
// route per ingress IP, hashed on the 5-tuple (fib_multipath_hash_policy 1),
// which is what a BGP router in front of MetalLB does with the routes the
// nodes announce. A probe round runs every interval; after each, routes whose
// set of healthy nodes changed are replaced, so a node is withdrawn at the
// latest at the end of the first round that starts after its check turned 503.
// A node that does not answer a probe at all keeps its state for two rounds
// more (an unhealthy threshold of three, as cloud load balancers have one): a
// loaded machine may be late with an answer, and withdrawing a node re-hashes
// the flows of the others.
package loadbalancer

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

// VIP is one ingress IP the balancer routes.
type VIP struct {
	IP netip.Addr
	// Service is "namespace/name", for messages.
	Service string
	// Local is externalTrafficPolicy Local: only nodes whose
	// HealthCheckNodePort answers 200 get its traffic.
	Local               bool
	HealthCheckNodePort int
}

// Node is a node the balancer may send traffic to.
type Node struct {
	Name string
	IP   netip.Addr
}

// Config says where the balancer runs and what it balances over.
type Config struct {
	// NetNS is the name of the balancer's network namespace.
	NetNS string
	// Link is the interface towards the nodes.
	Link string
	// Nodes are in the order next hops are listed.
	Nodes []Node
	// Interval is the time between the starts of two probe rounds.
	Interval time.Duration
}

// Change is one replacement of an ingress IP's route.
type Change struct {
	At time.Time
	// Round is the probe round whose results made the change (1 for the
	// first).
	Round uint64
	IP    netip.Addr
	// Nodes are the next hops from then on; none means the IP is dropped.
	Nodes []string
}

// Balancer probes the nodes and keeps one route per ingress IP.
type Balancer struct {
	cfg    Config
	ns     *namespaces.NS
	link   int
	client *http.Client
	// firstClient asks a check that was never answered: no route depends on it
	// yet, so a loaded machine gets firstProbeIntervals intervals to answer,
	// where a route's next hop would otherwise start as a blackhole.
	firstClient *http.Client

	// roundMu serialises probe rounds: the loop's and those SetVIPs runs.
	roundMu sync.Mutex

	mu   sync.Mutex
	vips []VIP
	hops map[netip.Addr][]string
	// health is each check's state, misses how many rounds in a row it went
	// unanswered.
	health  map[check]bool
	misses  map[check]int
	rounds  uint64
	changes []Change
	paused  bool

	stop chan struct{}
	done chan struct{}
}

// Start opens the balancer in its namespace, runs a first probe round and routes
// vips by its results before it returns, then probes every interval until Close.
func Start(cfg Config, vips []VIP) (*Balancer, error) {
	if cfg.Interval <= 0 {
		return nil, fmt.Errorf("load balancer in %s: probe interval %s", cfg.NetNS, cfg.Interval)
	}
	ns, err := namespaces.Open(cfg.NetNS)
	if err != nil {
		return nil, fmt.Errorf("load balancer: %w", err)
	}
	link, err := ns.Netlink.LinkByName(cfg.Link)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("load balancer in %s: link %s: %w", cfg.NetNS, cfg.Link, err)
	}
	b := &Balancer{
		cfg: cfg, ns: ns, link: link.Attrs().Index,
		// A probe not answered when the next round is due goes unanswered.
		client:      traffic.HTTPClient(cfg.NetNS, cfg.Interval),
		firstClient: traffic.HTTPClient(cfg.NetNS, firstProbeIntervals*cfg.Interval),
		hops:        map[netip.Addr][]string{},
		health:      map[check]bool{}, misses: map[check]int{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := b.SetVIPs(vips); err != nil {
		ns.Close()
		return nil, err
	}
	go b.loop()
	return b, nil
}

func (b *Balancer) loop() {
	defer close(b.done)
	tick := time.NewTicker(b.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			// A round that fails to route is tried again next round; the
			// routes it could not replace stay as they were.
			_ = b.round()
		}
	}
}

// SetVIPs makes vips the ingress IPs the balancer routes: routes of those no
// longer among them are deleted, and when the set changed a probe round routes
// the rest at once, as a load balancer controller configures a new one before
// it reports its address.
func (b *Balancer) SetVIPs(vips []VIP) error {
	b.roundMu.Lock()
	defer b.roundMu.Unlock()
	b.mu.Lock()
	same := slices.Equal(b.vips, vips) && b.rounds > 0
	var gone []netip.Addr
	for ip := range b.hops {
		if !slices.ContainsFunc(vips, func(v VIP) bool { return v.IP == ip }) {
			gone = append(gone, ip)
		}
	}
	b.vips = slices.Clone(vips)
	b.mu.Unlock()
	if same {
		return nil
	}
	var errs []error
	for _, ip := range gone {
		if err := b.ns.Netlink.RouteDel(&netlink.Route{Dst: hostRoute(ip)}); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("load balancer in %s: delete route %s: %w", b.cfg.NetNS, ip, err))
		}
		b.mu.Lock()
		delete(b.hops, ip)
		b.mu.Unlock()
	}
	return errors.Join(append(errs, b.probeAndRoute())...)
}

// round is one probe round of the loop, unless the balancer is paused.
func (b *Balancer) round() error {
	b.roundMu.Lock()
	defer b.roundMu.Unlock()
	b.mu.Lock()
	paused := b.paused
	b.mu.Unlock()
	if paused {
		return nil
	}
	return b.probeAndRoute()
}

// probeAndRoute probes every node once for what the VIPs need, then replaces
// the routes whose next hops changed. roundMu is held.
func (b *Balancer) probeAndRoute() error {
	b.mu.Lock()
	vips := slices.Clone(b.vips)
	b.mu.Unlock()
	healthy := b.probe(vips)
	b.mu.Lock()
	b.rounds++
	round := b.rounds
	b.mu.Unlock()
	var errs []error
	for _, v := range vips {
		var nodes []string
		for _, n := range b.cfg.Nodes {
			if healthy[check{n.IP, portOf(v)}] {
				nodes = append(nodes, n.Name)
			}
		}
		b.mu.Lock()
		cur, routed := b.hops[v.IP]
		b.mu.Unlock()
		if routed && slices.Equal(cur, nodes) {
			continue
		}
		if err := b.route(v.IP, nodes); err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		b.hops[v.IP] = nodes
		b.changes = append(b.changes, Change{At: time.Now(), Round: round, IP: v.IP, Nodes: nodes})
		b.mu.Unlock()
	}
	return errors.Join(errs...)
}

// check is one probe: a node's address and the port asked.
type check struct {
	node netip.Addr
	port int
}

// portOf is the port a VIP's nodes are probed on: its health check node port
// with policy Local, kube-proxy's /healthz otherwise.
func portOf(v VIP) int {
	if v.Local {
		return v.HealthCheckNodePort
	}
	return proxy.HealthzPort
}

// firstProbeIntervals is how many intervals a check never answered before may
// take to answer.
const firstProbeIntervals = 10

// unansweredLimit is how many rounds in a row a check may go unanswered before
// its node counts as down.
const unansweredLimit = 3

// probe asks every node, in parallel, on every port the VIPs need. A check
// passes with a 200 and fails with any other answer; unanswered, it keeps its
// last state until unansweredLimit rounds in a row went so (a check never
// answered fails; until it is first answered it is given firstProbeIntervals
// intervals).
func (b *Balancer) probe(vips []VIP) map[check]bool {
	var checks []check
	for _, n := range b.cfg.Nodes {
		for _, v := range vips {
			c := check{n.IP, portOf(v)}
			if !slices.Contains(checks, c) {
				checks = append(checks, c)
			}
		}
	}
	codes := make(map[check]int, len(checks))
	b.mu.Lock()
	clients := make(map[check]*http.Client, len(checks))
	for _, c := range checks {
		clients[c] = b.client
		if _, answered := b.health[c]; !answered {
			clients[c] = b.firstClient
		}
	}
	b.mu.Unlock()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := b.get(clients[c], c)
			mu.Lock()
			codes[c] = code
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	healthy := make(map[check]bool, len(checks))
	for c, code := range codes {
		switch {
		case code == 0:
			b.misses[c]++
			if b.misses[c] >= unansweredLimit {
				b.health[c] = false
			}
		default:
			b.misses[c] = 0
			b.health[c] = code == http.StatusOK
		}
		healthy[c] = b.health[c]
	}
	return healthy
}

// get is one probe's status code, 0 when it got none.
func (b *Balancer) get(client *http.Client, c check) int {
	path := "/"
	if c.port == proxy.HealthzPort {
		path = "/healthz"
	}
	resp, err := client.Get("http://" + net.JoinHostPort(c.node.String(), strconv.Itoa(c.port)) + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// route replaces ip's route: one next hop, several (a multipath route), or
// none (a blackhole: a load balancer with no healthy backend drops).
func (b *Balancer) route(ip netip.Addr, nodes []string) error {
	r := &netlink.Route{Dst: hostRoute(ip), Protocol: unix.RTPROT_STATIC}
	var gws []net.IP
	for _, name := range nodes {
		i := slices.IndexFunc(b.cfg.Nodes, func(n Node) bool { return n.Name == name })
		gws = append(gws, b.cfg.Nodes[i].IP.AsSlice())
	}
	switch len(gws) {
	case 0:
		r.Type = unix.RTN_BLACKHOLE
	case 1:
		r.LinkIndex, r.Gw = b.link, gws[0]
	default:
		for _, gw := range gws {
			r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{LinkIndex: b.link, Gw: gw})
		}
	}
	if err := b.ns.Netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("load balancer in %s: route %s via %v: %w", b.cfg.NetNS, ip, nodes, err)
	}
	return nil
}

func hostRoute(ip netip.Addr) *net.IPNet {
	return &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}
}

// NextHops are the nodes ip is routed to now.
func (b *Balancer) NextHops(ip netip.Addr) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.hops[ip])
}

// Rounds is how many probe rounds have completed.
func (b *Balancer) Rounds() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rounds
}

// Changes lists every route replacement so far, oldest first.
func (b *Balancer) Changes() []Change {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.changes)
}

// Pause stops (true) or resumes (false) the probe rounds, leaving the routes as
// they are: a load balancer that stopped health checking.
func (b *Balancer) Pause(paused bool) {
	b.mu.Lock()
	b.paused = paused
	b.mu.Unlock()
	// A round under way finishes first: once Pause returns, none starts.
	b.roundMu.Lock()
	b.roundMu.Unlock() //nolint:staticcheck // an empty critical section: waiting is its point
}

// Interval is the time between probe rounds.
func (b *Balancer) Interval() time.Duration { return b.cfg.Interval }

// Close stops the probe rounds. The routes stay with the namespace.
func (b *Balancer) Close() error {
	select {
	case <-b.stop:
		return nil
	default:
		close(b.stop)
	}
	<-b.done
	b.roundMu.Lock()
	defer b.roundMu.Unlock()
	return b.ns.Close()
}
