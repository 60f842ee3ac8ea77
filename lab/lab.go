// Package lab builds a fake Kubernetes cluster out of network namespaces: a fabric
// namespace whose bridge is the node network, a namespace per node with eth0 on that
// bridge and a cni0 bridge for its pods, a namespace per pod and per outside client.
// It installs a proxy mode's rules into every node, serves every pod port, and
// re-programs the nodes when pods or Services change. Nothing touches the root
// network namespace.
package lab

import (
	"context"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/balancing"
	"github.com/svclab/svclab/lab/clusterdns"
	"github.com/svclab/svclab/lab/components"
	"github.com/svclab/svclab/lab/controlplane"
	"github.com/svclab/svclab/lab/kubelet"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/network"
	"github.com/svclab/svclab/lab/proxies"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/sandboxes"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/version"
)

// Options say how to build a lab.
type Options struct {
	// Mode is the proxy mode programmed into every node (one of proxy.Modes());
	// empty means no Service rules at all, a bare network.
	Mode string
	// Proxy configures the proxiers. What it leaves unset comes from the
	// topology (see ConfigOf).
	Proxy proxy.Config
	// KubeProxyVersion overrides the topology's kubeProxyVersion when not empty.
	KubeProxyVersion string
	// ControlPlane gives the lab a control plane even when its topology has
	// none (controlPlane: true).
	ControlPlane bool
	// KubeProxy runs the real kube-proxy in every node instead of svclab's own
	// proxiers; it implies a control plane.
	KubeProxy *proxies.KubeProxyOptions
	// KubeBinary is the svclab-kube binary the control plane runs from; empty
	// finds or builds it (kube.Binary).
	KubeBinary string
	// NoServers leaves the pods without servers (for benchmarks that only program
	// rules).
	NoServers bool
	// RunID names this run (four characters of [a-z2-7]); random when empty. The CLI
	// picks it before it starts the process that owns the lab, to name its log.
	RunID string
	// RecordDir is where the lab is recorded; record.DefaultDir when empty.
	RecordDir string
	// Parallel bounds how many namespaces are set up at once; 8 when zero.
	Parallel int
	// Log receives one-line progress messages; nil discards them.
	Log io.Writer
}

// Lab is a running lab. Its methods are safe for concurrent use.
//
// A Lab assembles its parts and keeps their lifecycle: the ledger of its
// members and record, the network (package network), the pods' sandboxes, the
// control plane, cluster DNS, load balancing, the supervision of its
// components, and the proxies. Each part keeps its own state; the parts reach
// the lab through the small interfaces they declare, not through Lab.
type Lab struct {
	ID    string
	RunID string

	opts   Options
	mode   proxy.Mode
	config proxy.Config
	dir    string
	// parallel bounds how many namespaces are set up at once.
	parallel int
	// logf writes a one-line progress message to Options.Log.
	logf func(format string, args ...any)

	// ledger holds the members and the record; net builds the namespaces
	// and links; pods are the pods' sandboxes.
	ledger *ledger
	net    *network.Network
	pods   *sandboxes.Sandboxes
	// cp is the control plane, nil without one; components are the processes
	// the lab started; kubelet plays the kubelet's role for the pods; proxies
	// program the nodes. They reach the lab as their host (lab/host.go).
	cp         *controlplane.ControlPlane
	components *components.Set
	kubelet    *kubelet.Kubelet
	proxies    *proxies.Proxies
	// supervisor watches the components, and restarts those a kubelet would.
	supervisor *supervise.Supervisor
	// dns is the cluster DNS, nil without one.
	dns *clusterdns.DNS
	// timings are the phases of Up, for `svclab up --timings`.
	timings *timings
	lbs     *balancing.Balancing

	// changeMu serialises topology changes and the syncs that follow them; mu
	// guards the fields below for short reads and writes. The lock order is
	// changeMu, then mu, then a part's own lock; see docs/design.md.
	changeMu sync.Mutex
	mu       sync.Mutex
	topo     *topology.Topology
	down     bool
	// host is what the parts see of the lab.
	host host
	// asked is the topology Up was given, before Prepare added what a
	// control plane brings: its counts are what the progress line reports.
	asked *topology.Topology
}

func newLab(asked *topology.Topology, o Options) (*Lab, error) {
	t, m, c, err := Prepare(asked, o)
	if err != nil {
		return nil, err
	}
	l := &Lab{
		opts: o, topo: t, asked: asked, dir: o.RecordDir, mode: m, config: c, parallel: o.Parallel, logf: logTo(o.Log),
	}
	if l.dir == "" {
		l.dir = record.DefaultDir
	}
	if l.parallel <= 0 {
		l.parallel = 8
	}
	l.host = host{l}
	l.RunID = o.RunID
	if l.RunID == "" {
		l.RunID = NewRunID()
	}
	l.ID = labID(t.Name, l.RunID)
	l.ledger = &ledger{lab: t.Name, run: l.RunID, dir: l.dir, rec: &record.Lab{ID: l.ID, Name: t.Name, RunID: l.RunID, Source: t.Source, Mode: o.Mode,
		Created: time.Now(), Owner: record.Self(), Backend: o.Proxy.Backend, KubeProxy: o.KubeProxy != nil}}
	// No one else has the ledger yet: its lock is not needed.
	l.ledger.addLocked(network.Fabric, member.KindFabric, netip.Addr{}, "")
	if cp := t.ControlPlane; cp != nil {
		l.ledger.addLocked(cp.Name, member.KindControlPlane, cp.IP, "")
	}
	for _, n := range t.Nodes {
		l.ledger.addLocked(n.Name, member.KindNode, n.IP, "")
	}
	for _, c := range t.Clients {
		l.ledger.addLocked(c.Name, member.KindClient, c.IP, "")
	}
	for _, lb := range t.LoadBalancers {
		l.ledger.addLocked(lb.Name, member.KindLoadBalancer, lb.IP, "")
	}
	for _, p := range t.Pods {
		l.ledger.addLocked(p.Name, member.KindPod, p.IP, p.Node)
	}
	l.ledger.rec.Members = l.ledger.recordsLocked()
	l.net = network.New(l.ledger, l.RunID, l.parallel)
	l.pods = sandboxes.New(l.ledger, l.net, l.parallel)
	l.lbs = balancing.New(l.ID, l.ledger, l.net)
	runDir := record.RunDir(l.dir, l.ID)
	// The cluster DNS, made below, is told of restarts: it reports a CoreDNS
	// pod's restart count (restarted takes a nil cluster DNS).
	sv := &components.Supervision{ID: l.ID, Logf: l.logf, Record: l.ledger,
		Restarted: func(ctx context.Context, c *supervise.Component) { l.dns.Restarted(ctx, c) }}
	l.supervisor = supervise.New(sv.Events())
	l.components = components.New(l.ledger, runDir, l.supervisor)
	if t.ControlPlane != nil {
		l.cp = controlplane.New(controlplane.Config{Host: l.host, Record: l.ledger, Logf: l.logf, Components: l.components, ID: l.ID, Name: t.Name, RunDir: runDir, KubeBinary: o.KubeBinary, Log: o.Log})
	}
	if t.ControlPlane != nil && t.DNS != nil {
		l.dns = clusterdns.New(clusterdns.Config{ID: l.ID, Domain: t.DNS.Domain, RunDir: runDir, Parallel: l.parallel, Logf: l.logf,
			Lab: l, ControlPlane: l.cp, Components: l.components, Changes: &l.changeMu})
	}
	l.kubelet = kubelet.New(l.host, l.dir, l.ID, l.cp)
	l.timings = &timings{start: time.Now()}
	l.proxies = proxies.New(proxies.Config{Host: l.host, Logf: l.logf, Phase: l.timings.add, ID: l.ID, Mode: m, Proxy: c, RunDir: runDir, Parallel: l.parallel,
		KubeProxy: o.KubeProxy, ControlPlane: l.cp, Components: l.components})
	return l, nil
}

// logTo is a printf of one-line messages to w, which may be nil: then it
// prints nothing.
func logTo(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}

// Down stops the servers and removes every namespace of the lab and its record. It
// may be called more than once.
func (l *Lab) Down() error {
	// Nothing may sync on the watch's or a readiness probe's behalf once the
	// proxiers close; the syncs they make take l.mu, so they stop first.
	// The components it stops are no deaths and are not restarted; what the
	// supervisor does is over when Close returns, which must not wait on mu.
	l.supervisor.Close()
	dnsErr := l.dns.Stop()
	l.proxies.StopStarting()
	if l.cp != nil {
		l.cp.StopFollowing()
	}
	// The balancers next, outside mu: they take the ledger's lock to look
	// their members up.
	lbErr := l.lbs.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return nil
	}
	l.down = true
	names := l.ledger.close()
	l.pods.Close()
	errs := []error{lbErr, dnsErr, l.proxies.Close(), l.components.Stop(), l.net.Delete(names)}
	if err := errors.Join(errs...); err != nil {
		// Keep the record so that `svclab clean` can finish the job.
		return fmt.Errorf("lab %s: down: %w", l.ID, err)
	}
	return record.Remove(l.dir, l.ID)
}

// Deaths lists the components of the lab that ended without the lab stopping
// them (killed, crashed), seen at or after since; a restarted one too.
func (l *Lab) Deaths(since time.Time) []record.Death { return l.supervisor.Deaths(since) }

// Name is the topology's name.
func (l *Lab) Name() string { return l.topo.Name }

// Member returns the member called name.
func (l *Lab) Member(name string) (*member.Member, error) { return l.ledger.Member(name) }

// Members lists every member, fabric first, then nodes, clients and pods.
func (l *Lab) Members() []record.Member { return l.ledger.Members() }

// Topology returns a copy of the lab's current topology.
func (l *Lab) Topology() *topology.Topology {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.topo.Clone()
}

// ProxyConfig is the configuration the lab's proxiers run with.
func (l *Lab) ProxyConfig() proxy.Config { return l.config }

// Mode is the lab's proxy mode name; empty for a bare network.
func (l *Lab) Mode() string { return l.mode.Name }

// ConfigOf is the proxy configuration of topology t under options o: o.Proxy,
// with the mode, the kube-proxy release, the cluster CIDR and the service range
// taken from o and t where o.Proxy leaves them unset.
func ConfigOf(t *topology.Topology, o Options) (proxy.Config, error) {
	c := o.Proxy
	name := t.KubeProxyVersion
	if o.KubeProxyVersion != "" {
		name = o.KubeProxyVersion
	}
	v, err := version.Parse(name)
	if err != nil {
		return proxy.Config{}, err
	}
	if c.Version == (version.Version{}) {
		c.Version = v
	}
	if c.KubeProxy.Mode == "" {
		c.KubeProxy.Mode = kubeproxyconfig.ProxyMode(o.Mode)
	}
	if c.KubeProxy.ClusterCIDR == "" && !c.ClusterCIDRGiven && t.ClusterCIDR.IsValid() {
		c.KubeProxy.ClusterCIDR = t.ClusterCIDR.String()
	}
	if !c.ServiceCIDR.IsValid() {
		c.ServiceCIDR = t.ServiceCIDR
	}
	return c, nil
}

// DNS is the lab's cluster DNS; nil without one.
func (l *Lab) DNS() *clusterdns.DNS { return l.dns }

// LoadBalancers is the lab's load balancing: its balancers and routes.
func (l *Lab) LoadBalancers() *balancing.Balancing { return l.lbs }

// ControlPlane is the lab's control plane; nil without one. Its Kubeconfig,
// Binary and Client take a nil control plane (an empty path, a nil client).
func (l *Lab) ControlPlane() *controlplane.ControlPlane { return l.cp }

// PodResolvConf is the resolv.conf the lab wrote for a pod, nil when the pod
// keeps the host's (no cluster DNS, or a CoreDNS pod).
func (l *Lab) PodResolvConf(pod string) ([]byte, error) { return l.kubelet.PodResolvConf(pod) }

// Sync programs every node with the Services and their endpoints, as kube-proxy
// on each node does after a change: computed from the topology, or with a control
// plane, as the API server holds them once its controller has made the
// endpoints the topology calls for. With the real kube-proxy, it waits until
// every node's dataplane says what kube-proxy must have programmed. Then it
// routes the load balancers to what the nodes now serve.
func (l *Lab) Sync(ctx context.Context) error {
	if l.mode.Name == "" {
		return nil
	}
	if err := l.proxies.Sync(ctx); err != nil {
		return err
	}
	return l.lbs.Sync(ctx, l.Topology())
}

// Proxies are what programs the lab's nodes: svclab's proxiers or the real
// kube-proxy's processes.
func (l *Lab) Proxies() *proxies.Proxies { return l.proxies }
