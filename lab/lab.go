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
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/network"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
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
	pods   *sandboxes
	// cp is the control plane, nil without one; components are the processes
	// the lab started; kubelet plays the kubelet's role for the pods; proxies
	// program the nodes. They reach the lab as their host (lab/host.go).
	cp         *controlPlane
	components *components
	kubelet    *kubelet
	proxies    *proxies
	// supervisor watches the components, and restarts those a kubelet would.
	supervisor *supervise.Supervisor
	// dns is the cluster DNS, nil without one.
	dns *clusterDNS
	// timings are the phases of Up, for `svclab up --timings`.
	timings *timings
	lbs     *loadBalancing

	// changeMu serialises topology changes and the syncs that follow them; mu
	// guards the fields below for short reads and writes. The lock order is
	// changeMu, then mu, then a part's own lock; see docs/design.md.
	changeMu sync.Mutex
	mu       sync.Mutex
	topo     *topology.Topology
	down     bool
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
	if err := l.ledger.write(); err != nil {
		return l, err
	}
	if err := os.MkdirAll(record.RunDir(l.dir, l.ID), 0o755); err != nil {
		return l, fmt.Errorf("lab %s: %w", l.ID, err)
	}
	if err := l.ledger.serve(); err != nil {
		return l, err
	}
	if l.topo.ControlPlane != nil {
		// Checked before anything is built: etcd would fail part-way, with a
		// message about its WAL that does not say why.
		if err := checkRunSpace(l.dir, controlPlaneSpace); err != nil {
			return l, fmt.Errorf("lab %s: %w", l.ID, err)
		}
	}
	start := time.Now()
	if err := l.net.Build(ctx, l.topo); err != nil {
		return l, err
	}
	if err := l.lbs.route(l.Topology()); err != nil {
		return l, err
	}
	l.timings.add(phaseBuild, start)
	l.logf("lab %s: %d nodes, %d pods, %d clients up in %s", l.ID, len(t.Nodes), len(t.Pods), len(t.Clients), time.Since(start).Round(time.Millisecond))
	if l.dns != nil {
		// A kubelet reports a CoreDNS pod not ready until its readiness
		// probe passes: so does the topology before it reaches the API server.
		l.mu.Lock()
		next, err := coreDNSStarting(l.topo)
		if err == nil {
			l.topo = next
		}
		l.mu.Unlock()
		if err != nil {
			return l, err
		}
	}
	if l.cp != nil {
		began := time.Now()
		if err := l.cp.startAPIServer(ctx); err != nil {
			return l, err
		}
		// A component takes seconds from its fork to its work on a loaded
		// machine (loading a 150 MB binary, a thousand package inits, its
		// own set-up): forked now, beside the API server's start, the
		// controller manager and CoreDNS wait for the kubeconfig that ready
		// writes, the kube-proxies for the lab's objects to be in the API
		// server (openProxyGate below), so that their first sync is the
		// whole topology. Without --wait-for (an older component binary)
		// they start once the API server is ready, kube-proxy then needing
		// its Node (its address) and nothing else.
		early := l.cp.waitFor
		var dnsBegan time.Time
		if early {
			if err := l.startComponents(ctx, true); err != nil {
				return l, err
			}
			dnsBegan = time.Now()
		}
		if err := l.cp.ready(ctx); err != nil {
			return l, err
		}
		l.timings.add(phaseAPIServer, began)
		if !early {
			if err := l.startComponents(ctx, false); err != nil {
				return l, err
			}
		} else if l.opts.KubeProxy != nil && l.opts.KubeProxy.Binary != "" {
			// A kube-proxy of the user's cannot wait: it starts now.
			l.proxies.startKubeProxies(ctx)
		}
		if err := l.cp.startWatch(); err != nil {
			return l, err
		}
		began = time.Now()
		if err := l.cp.applyTopology(ctx, l.kubelet.writePods); err != nil {
			return l, err
		}
		l.timings.add(phaseTopology, began)
		if l.dns != nil {
			if !early {
				dnsBegan = time.Now()
				if err := l.dns.launch(l.Topology(), ""); err != nil {
					return l, err
				}
			}
			if err := l.dns.wait(ctx); err != nil {
				return l, err
			}
			l.timings.add(phaseDNSAnswers, dnsBegan)
			began = time.Now()
			if err := l.change(ctx, l.dns.ready, nil); err != nil {
				return l, err
			}
			l.timings.add(phaseDNSReady, began)
		}
	}
	if l.cp != nil {
		// The state the nodes must be programmed with is in the API server:
		// the kube-proxies forked early may run.
		if err := l.cp.openProxyGate(); err != nil {
			return l, err
		}
	}
	if l.mode.Name != "" {
		began := time.Now()
		if err := l.proxies.start(); err != nil {
			return l, err
		}
		began2 := time.Now()
		if err := l.Sync(ctx); err != nil {
			return l, err
		}
		l.timings.add(phaseProxiesStarted, began)
		l.timings.add(phaseProgrammed, began2)
	}
	if err := l.lbs.start(l.Topology()); err != nil {
		return l, err
	}
	if !o.NoServers {
		began := time.Now()
		if err := l.pods.serve(ctx, l.topo.Pods); err != nil {
			return l, err
		}
		if err := l.pods.serveNodes(ctx, l.topo.Nodes, l.topo.EndpointSlices()); err != nil {
			return l, err
		}
		l.timings.add(phaseServers, began)
	}
	if err := l.kubelet.writePodFiles(l.topo.Pods); err != nil {
		return l, err
	}
	// The Services the lab came up with, for `svclab inspect`.
	ports := l.proxies.servicePorts()
	if err := l.ledger.update(func(r *record.Lab) { r.Services = ServiceRecords(ports) }); err != nil {
		return l, err
	}
	if l.cp != nil && l.mode.Name != "" {
		l.cp.follow(&l.changeMu, l.Sync)
	}
	l.dns.startProbes()
	// Up reports a lab whole or not at all: a namespace that vanished while
	// the lab came up (removed from outside) fails it.
	if err := checkWhole(l.ID, l.Members()); err != nil {
		return l, err
	}
	l.timings.add(phaseUp, l.timings.start)
	// The start's phases go into the record, where up --timings and ls --json
	// read them; later syncs are the lab's changes, not its start.
	phases := l.timings.finish()
	return l, l.ledger.update(func(r *record.Lab) { r.Timings = phases })
}

// startComponents starts the controller manager and the kube-proxies, and
// with early (before the API server is ready; each waits for the kubeconfig)
// the CoreDNS replicas too, which otherwise start once the topology is applied.
// A kube-proxy of the user's is not started early: it cannot wait.
func (l *Lab) startComponents(ctx context.Context, early bool) error {
	if err := l.cp.startControllerManager(); err != nil {
		return err
	}
	if l.opts.KubeProxy != nil && (!early || l.opts.KubeProxy.Binary == "") {
		l.proxies.startKubeProxies(ctx)
	}
	if early && l.dns != nil {
		return l.dns.launch(l.Topology(), l.cp.waitForKubeconfig())
	}
	return nil
}

// checkWhole fails, naming them, when any of the namespaces of lab id's
// members is gone.
func checkWhole(id string, members []record.Member) error {
	var gone []string
	for _, m := range members {
		if !namespaces.Exists(m.NetNS) {
			gone = append(gone, m.NetNS)
		}
	}
	if len(gone) > 0 {
		return fmt.Errorf("lab %s is not whole: %d of its %d namespaces vanished while it came up (%s); something removed them from outside",
			id, len(gone), len(members), strings.Join(gone, ", "))
	}
	return nil
}

func newLab(t *topology.Topology, o Options) (*Lab, error) {
	t, m, c, err := Prepare(t, o)
	if err != nil {
		return nil, err
	}
	l := &Lab{
		opts: o, topo: t, dir: o.RecordDir, mode: m, config: c, parallel: o.Parallel, logf: logTo(o.Log),
	}
	if l.dir == "" {
		l.dir = record.DefaultDir
	}
	if l.parallel <= 0 {
		l.parallel = 8
	}
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
	l.pods = &sandboxes{members: l.ledger, net: l.net, parallel: l.parallel}
	l.lbs = &loadBalancing{lab: l.ID, members: l.ledger, net: l.net}
	runDir := record.RunDir(l.dir, l.ID)
	l.components = &components{rec: l.ledger, runDir: runDir}
	if t.ControlPlane != nil && t.DNS != nil {
		l.dns = &clusterDNS{lab: l, id: l.ID, domain: t.DNS.Domain, runDir: runDir, parallel: l.parallel, logf: l.logf, comps: l.components, changes: &l.changeMu}
	}
	sv := &supervision{id: l.ID, logf: l.logf, record: l.ledger, dns: l.dns}
	l.supervisor = supervise.New(sv.events())
	l.components.supervisor = l.supervisor
	if t.ControlPlane != nil {
		l.cp = &controlPlane{host: l, rec: l.ledger, logf: l.logf, comps: l.components, id: l.ID, name: t.Name, runDir: runDir, kubeBinary: o.KubeBinary, log: o.Log}
	}
	l.kubelet = &kubelet{host: l, dir: l.dir, id: l.ID, cp: l.cp}
	l.timings = &timings{start: time.Now()}
	l.proxies = &proxies{host: l, logf: l.logf, phase: l.timings.add, id: l.ID, mode: m, config: c, runDir: runDir, parallel: l.parallel, kubeProxy: o.KubeProxy,
		cp: l.cp, comps: l.components, proxiers: map[string]proxy.Proxier{}, health: map[string]*proxy.HealthServer{}}
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
	dnsErr := l.dns.stop()
	l.proxies.stopStarting()
	if l.cp != nil {
		l.cp.stopFollowing()
	}
	// The balancers next, outside mu: they take the ledger's lock to look
	// their members up.
	lbErr := l.lbs.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return nil
	}
	l.down = true
	names := l.ledger.close()
	l.pods.close()
	errs := []error{lbErr, dnsErr, l.proxies.close(), l.components.stop(), l.net.Delete(names)}
	if err := errors.Join(errs...); err != nil {
		// Keep the record so that `svclab clean` can finish the job.
		return fmt.Errorf("lab %s: down: %w", l.ID, err)
	}
	return record.Remove(l.dir, l.ID)
}

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

// ServicePorts returns the state last programmed into the nodes.
func (l *Lab) ServicePorts() []proxy.ServicePort { return l.proxies.servicePorts() }

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
