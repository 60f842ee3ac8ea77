// Package lab builds a fake Kubernetes cluster out of network namespaces: a fabric
// namespace whose bridge is the node network, a namespace per node with eth0 on that
// bridge and a cni0 bridge for its pods, a namespace per pod and per outside client.
// It installs a proxy mode's rules into every node, serves every pod port, and
// re-programs the nodes when pods or Services change. Nothing touches the root
// network namespace.
package lab

import (
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
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
	KubeProxy *KubeProxyOptions
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
type Lab struct {
	ID    string
	RunID string

	opts   Options
	mode   proxy.Mode
	config proxy.Config
	dir    string
	record *record.Lab
	// The lab's parts, which reach the lab as their host: cp is the control
	// plane, nil without one; components are the processes the lab started;
	// kubelet plays the kubelet's role for the pods; proxies program the nodes.
	cp         *controlPlane
	components *components
	kubelet    *kubelet
	proxies    *proxies
	// supervisor watches the components, and restarts those a kubelet would.
	supervisor *supervise.Supervisor
	// dns is the running cluster DNS, nil without one.
	dns *clusterDNS

	// changeMu serialises topology changes and the syncs that follow them; mu
	// guards the fields below for short reads and writes, and is taken inside
	// changeMu, never around it. The parts' own locks are taken inside mu.
	// See docs/design.md, "Locks".
	changeMu sync.Mutex
	mu       sync.Mutex
	topo     *topology.Topology
	members  map[string]*member.Member
	servers  map[string]*traffic.Server
	down     bool
	lbs      loadBalancing
}

// Up builds the lab described by t and returns it running. On any error, on ctx's
// cancellation and on panic it removes everything it created before returning.
func Up(ctx context.Context, t *topology.Topology, o Options) (l *Lab, err error) {
	if err := namespaces.CheckPrivileges(); err != nil {
		return nil, err
	}
	l, err = newLab(t, o)
	if err != nil {
		return nil, err
	}
	if o.Mode != "" {
		if err := l.mode.Available(); err != nil {
			return nil, fmt.Errorf("mode %s: %w", l.mode.Name, err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			l.Down()
			panic(p)
		}
		if err != nil {
			err = errors.Join(err, l.Down())
			l = nil
		}
	}()
	if err := record.Write(l.dir, l.record); err != nil {
		return l, err
	}
	if err := os.MkdirAll(record.RunDir(l.dir, l.ID), 0o755); err != nil {
		return l, fmt.Errorf("lab %s: %w", l.ID, err)
	}
	if l.topo.ControlPlane != nil {
		// Checked before anything is built: etcd would fail part-way, with a
		// message about its WAL that does not say why.
		if err := checkRunSpace(l.dir, controlPlaneSpace); err != nil {
			return l, fmt.Errorf("lab %s: %w", l.ID, err)
		}
	}
	start := time.Now()
	if err := l.build(ctx); err != nil {
		return l, err
	}
	l.logf("lab %s: %d nodes, %d pods, %d clients up in %s", l.ID, len(t.Nodes), len(t.Pods), len(t.Clients), time.Since(start).Round(time.Millisecond))
	if l.cp != nil {
		if err := l.cp.startAPIServer(ctx); err != nil {
			return l, err
		}
		// kube-proxy needs its Node (its address) and nothing else to start;
		// its first sync takes seconds, which the rest of the lab's objects
		// need not wait for.
		if l.opts.KubeProxy != nil {
			l.proxies.startKubeProxies(ctx)
		}
		if err := l.cp.startControllers(); err != nil {
			return l, err
		}
		if err := l.dnsPodsStarting(); err != nil {
			return l, err
		}
		if err := l.cp.applyTopology(ctx, l.kubelet.writePods); err != nil {
			return l, err
		}
		if l.topo.DNS != nil {
			if err := l.startDNS(ctx); err != nil {
				return l, err
			}
		}
	}
	if l.mode.Name != "" {
		if err := l.proxies.start(); err != nil {
			return l, err
		}
		if err := l.Sync(ctx); err != nil {
			return l, err
		}
	}
	if err := l.startLoadBalancers(); err != nil {
		return l, err
	}
	if !o.NoServers {
		if err := l.startServers(ctx, l.topo.Pods); err != nil {
			return l, err
		}
	}
	if err := l.kubelet.writePodFiles(l.topo.Pods); err != nil {
		return l, err
	}
	// The Services the lab came up with, for `svclab inspect`.
	ports := l.proxies.servicePorts()
	if err := l.updateRecord(func(r *record.Lab) { r.Services = ServiceRecords(ports) }); err != nil {
		return l, err
	}
	if l.cp != nil && l.mode.Name != "" {
		l.cp.follow(&l.changeMu, l.Sync)
	}
	l.startDNSProbes()
	// Up reports a lab whole or not at all: a namespace that vanished while
	// the lab came up (removed from outside) fails it.
	if err := l.checkWhole(); err != nil {
		return l, err
	}
	return l, nil
}

// checkWhole fails, naming them, when any of the lab's namespaces is gone.
func (l *Lab) checkWhole() error {
	var gone []string
	for _, m := range l.Members() {
		if !namespaces.Exists(m.NetNS) {
			gone = append(gone, m.NetNS)
		}
	}
	if len(gone) > 0 {
		return fmt.Errorf("lab %s is not whole: %d of its %d namespaces vanished while it came up (%s); something removed them from outside",
			l.ID, len(gone), len(l.members), strings.Join(gone, ", "))
	}
	return nil
}

func newLab(t *topology.Topology, o Options) (*Lab, error) {
	t, m, c, err := Prepare(t, o)
	if err != nil {
		return nil, err
	}
	l := &Lab{
		opts: o, topo: t, dir: o.RecordDir, mode: m,
		members: map[string]*member.Member{},
		servers: map[string]*traffic.Server{},
	}
	if l.dir == "" {
		l.dir = record.DefaultDir
	}
	l.supervisor = supervise.New(supervise.Events{Died: l.componentDied, Restarted: l.componentRestarted, RestartFailed: l.componentRestartFailed})
	l.config = c
	l.RunID = o.RunID
	if l.RunID == "" {
		l.RunID = NewRunID()
	}
	l.ID = labID(t.Name, l.RunID)
	l.addMember(fabricMember, member.KindFabric, netip.Addr{}, "")
	if cp := t.ControlPlane; cp != nil {
		l.addMember(cp.Name, member.KindControlPlane, cp.IP, "")
	}
	for _, n := range t.Nodes {
		l.addMember(n.Name, member.KindNode, n.IP, "")
	}
	for _, c := range t.Clients {
		l.addMember(c.Name, member.KindClient, c.IP, "")
	}
	for _, lb := range t.LoadBalancers {
		l.addMember(lb.Name, member.KindLoadBalancer, lb.IP, "")
	}
	for _, p := range t.Pods {
		l.addMember(p.Name, member.KindPod, p.IP, p.Node)
	}
	l.record = &record.Lab{ID: l.ID, Name: t.Name, RunID: l.RunID, Source: t.Source, Mode: o.Mode, Created: time.Now(), Owner: record.Self(),
		Backend: o.Proxy.Backend, KubeProxy: o.KubeProxy != nil}
	l.record.Members = l.memberRecords()
	runDir := record.RunDir(l.dir, l.ID)
	l.components = &components{host: l, runDir: runDir, supervisor: l.supervisor}
	if t.ControlPlane != nil {
		l.cp = &controlPlane{host: l, comps: l.components, id: l.ID, name: t.Name, runDir: runDir, kubeBinary: o.KubeBinary, log: o.Log}
	}
	l.kubelet = &kubelet{host: l, dir: l.dir, id: l.ID, cp: l.cp}
	l.proxies = &proxies{host: l, id: l.ID, mode: m, config: c, runDir: runDir, parallel: l.parallel(), kubeProxy: o.KubeProxy,
		cp: l.cp, comps: l.components, proxiers: map[string]proxy.Proxier{}, health: map[string]*proxy.HealthServer{}}
	return l, nil
}

func (l *Lab) addMember(name, kind string, ip netip.Addr, node string) *member.Member {
	m := &member.Member{Name: name, Kind: kind, NetNS: namespaceName(l.topo.Name, name, l.RunID), IP: ip, Node: node}
	l.members[name] = m
	return m
}

func (l *Lab) memberRecords() []record.Member {
	recs := make([]record.Member, 0, len(l.members))
	for _, m := range l.members {
		r := record.Member{Name: m.Name, Kind: m.Kind, NetNS: m.NetNS, Node: m.Node}
		if m.IP.IsValid() {
			r.IP = m.IP.String()
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Kind != recs[j].Kind {
			return kindOrder[recs[i].Kind] < kindOrder[recs[j].Kind]
		}
		return recs[i].Name < recs[j].Name
	})
	return recs
}

// kindOrder lists members the way `svclab up` prints them.
var kindOrder = map[string]int{member.KindFabric: 0, member.KindControlPlane: 1, member.KindLoadBalancer: 2, member.KindNode: 3, member.KindClient: 4, member.KindPod: 5}

func (l *Lab) logf(format string, args ...any) {
	if l.opts.Log != nil {
		fmt.Fprintf(l.opts.Log, format+"\n", args...)
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
	dnsErr := l.stopDNS()
	l.proxies.stopStarting()
	if l.cp != nil {
		l.cp.stopFollowing()
	}
	// The balancers next, outside mu: they take it to look the lab up.
	lbErr := l.stopLoadBalancers()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return nil
	}
	l.down = true
	for _, s := range l.servers {
		s.Close()
	}
	errs := []error{lbErr, dnsErr, l.proxies.close(), l.components.stop()}
	names := make([]string, 0, len(l.members))
	for _, m := range l.members {
		names = append(names, m.NetNS)
	}
	errs = append(errs, deleteNamespaces(names, l.parallel()))
	if err := errors.Join(errs...); err != nil {
		// Keep the record so that `svclab clean` can finish the job.
		return fmt.Errorf("lab %s: down: %w", l.ID, err)
	}
	return record.Remove(l.dir, l.ID)
}

func (l *Lab) parallel() int {
	if l.opts.Parallel > 0 {
		return l.opts.Parallel
	}
	return 8
}

// Name is the topology's name.
func (l *Lab) Name() string { return l.topo.Name }

// Member returns the member called name.
func (l *Lab) Member(name string) (*member.Member, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.members[name]
	if !ok {
		return nil, fmt.Errorf("lab %s has no member %q", l.ID, name)
	}
	c := *m
	return &c, nil
}

// Members lists every member, fabric first, then nodes, clients and pods.
func (l *Lab) Members() []record.Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.memberRecords()
}

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

// ServicePorts returns the state last programmed into the nodes.
func (l *Lab) ServicePorts() []proxy.ServicePort { return l.proxies.servicePorts() }

func deleteNamespaces(names []string, parallel int) error {
	return forEach(context.Background(), parallel, names, func(_ context.Context, name string) error {
		return namespaces.Delete(name)
	})
}

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
