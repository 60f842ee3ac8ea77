package proxies

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
)

// KubeProxyOptions run the real kube-proxy in every node.
type KubeProxyOptions struct {
	// Binary is a kube-proxy of the user's (--kube-proxy-binary); empty runs the
	// one in the component binary.
	Binary string
	// Fragment is merged over the lab's KubeProxyConfiguration (shorthand flags
	// over the user's --kube-proxy-config); nil: none.
	Fragment *kube.ProxyFragment
	// MinSyncPeriod is the mode's minSyncPeriod; 0 keeps kube-proxy's default.
	MinSyncPeriod time.Duration
}

// programmedWithin bounds how long kube-proxy may take to program a change: its
// minSyncPeriod (1 s by default) plus the sync itself, which takes seconds for
// thousands of Services in svclab's VM.
const programmedWithin = 60 * time.Second

// kubeProxy is the real kube-proxy of one node, as a proxy.Proxier: it follows
// the API server by itself, and Sync waits until the node's dataplane, read
// back by the mode's reader, is what kube-proxy must program for the state.
type kubeProxy struct {
	comp *supervise.Component
	mode proxy.Mode
	cfg  proxy.Config
	// backend is the xtables backend kube-proxy writes its rules with.
	backend string
	node    proxy.Node
	ns      *namespaces.NS
}

// StartKubeProxies starts kube-proxy in every node, beside the rest of the
// control plane's start (before the API server is ready when the component
// binary's kube-proxy waits for the kubeconfig), and waits for each one's
// first sync; start returns the outcome.
func (p *Proxies) StartKubeProxies(ctx context.Context) {
	ctx, p.cancelStart = context.WithCancel(ctx)
	p.started, p.starting = make(chan error, 1), make(chan struct{})
	go func() {
		defer close(p.starting)
		p.started <- fanout.Each(ctx, p.c.Parallel, p.c.Host.Snapshot().Nodes, func(ctx context.Context, n topology.Node) error {
			kp, err := p.startKubeProxy(ctx, n)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			p.mu.Lock()
			p.proxiers[n.Name] = kp
			p.mu.Unlock()
			return nil
		})
	}()
}

// StopStarting stops the start of the kube-proxies and waits for it, so that
// every process started is known to the components when they stop.
func (p *Proxies) StopStarting() {
	if p.starting != nil {
		p.cancelStart()
		<-p.starting
	}
}

func (p *Proxies) startKubeProxy(ctx context.Context, n topology.Node) (*kubeProxy, error) {
	backend := p.c.Proxy.Backend
	if backend == "" {
		backend = p.c.Mode.VariantOf(p.c.Proxy).Backend
	}
	// A DaemonSet's pod: its kubelet restarts it.
	c, err := p.runKubeProxy(ctx, n, p.c.Mode, backend, *p.c.KubeProxy, true)
	if err != nil {
		return nil, err
	}
	m, err := p.c.Host.Member(n.Name)
	if err != nil {
		return nil, err
	}
	ns, err := namespaces.Open(m.NetNS)
	if err != nil {
		return nil, err
	}
	return &kubeProxy{comp: c, mode: p.c.Mode, cfg: p.c.Proxy, backend: backend, node: proxy.Node{Name: n.Name, IP: n.IP, PodCIDR: n.PodCIDR}, ns: ns}, nil
}

// KubeProxyRun is one kube-proxy a caller runs on a node (StartKubeProxy).
type KubeProxyRun struct {
	Node string
	// Mode is kube-proxy's mode, one of proxy.Modes().
	Mode string
	// Backend is the xtables backend (nft, legacy) of the modes that write
	// iptables rules; empty: the mode's first variant's.
	Backend string
	KubeProxyOptions
}

// StartKubeProxy starts the real kube-proxy on a node of a lab that has a
// control plane and whose nodes nothing else programs (no Mode), and waits for
// its first sync; for callers that run kube-proxies of their own on a node,
// one after another (benchmarks: a kube-proxy started over Services already in
// the API server makes its first sync of all of them at once, as after a
// restart). The process is one of the lab's components: the caller may stop
// it, and the lab's Down stops it if the caller has not; it is the caller's,
// so the lab does not restart it.
func (p *Proxies) StartKubeProxy(ctx context.Context, r KubeProxyRun) (*kube.Process, error) {
	if p.c.ControlPlane == nil {
		return nil, fmt.Errorf("lab %s has no control plane for kube-proxy to follow", p.c.ID)
	}
	if p.c.Mode.Name != "" {
		return nil, fmt.Errorf("lab %s: its nodes are programmed in mode %s already", p.c.ID, p.c.Mode.Name)
	}
	m, err := proxy.Lookup(r.Mode)
	if err != nil {
		return nil, err
	}
	if err := m.Available(); err != nil {
		return nil, fmt.Errorf("mode %s: %w", m.Name, err)
	}
	n, ok := p.c.Host.Snapshot().Node(r.Node)
	if !ok {
		return nil, fmt.Errorf("lab %s has no node %q", p.c.ID, r.Node)
	}
	backend := r.Backend
	if backend == "" {
		backend = m.VariantOf(proxy.Config{}).Backend
	}
	c, err := p.runKubeProxy(ctx, n, m, backend, r.KubeProxyOptions, false)
	if err != nil {
		return nil, err
	}
	return c.Process(), nil
}

// runKubeProxy starts kube-proxy in mode m on node n, writing iptables rules
// (iptables and IPVS modes) with the given xtables backend, and waits for its
// first sync; with restart, the lab restarts it after a death.
func (p *Proxies) runKubeProxy(ctx context.Context, n topology.Node, m proxy.Mode, backend string, o KubeProxyOptions, restart bool) (*supervise.Component, error) {
	mem, err := p.c.Host.Member(n.Name)
	if err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(p.c.RunDir, "kube-proxy-"+n.Name+".yaml")
	err = kube.WriteProxyConfig(cfgFile, kube.ProxyConfig{
		Mode: m.Name, ClusterCIDR: p.c.Host.Snapshot().ClusterCIDR, NodeName: n.Name, NodeIP: n.IP,
		Kubeconfig: p.c.ControlPlane.Kubeconfig(), MinSyncPeriod: o.MinSyncPeriod, Fragment: o.Fragment,
	})
	if err != nil {
		return nil, err
	}
	if m.Section == proxy.SectionNFTables {
		// The nftables mode writes no iptables rules.
		backend = ""
	}
	pc := kube.ProxyProcessConfig{
		Name: "kube-proxy " + n.Name, Netns: mem.NetNS, ConfigFile: cfgFile, Binary: o.Binary,
		IPTablesBackend: backend, RunDir: p.c.RunDir, LogFile: p.c.Components.LogFile("kube-proxy-" + n.Name),
	}
	if o.Binary == "" {
		// Forked beside the API server's start, it runs once the lab's
		// objects are in the API server (controlplane.ControlPlane.ProxyGate).
		pc.WaitFor = p.c.ControlPlane.ProxyGate()
	}
	proc, err := kube.StartProxy(p.c.ControlPlane.Binary(), pc)
	if err != nil {
		return nil, err
	}
	var again supervise.Restart
	if restart {
		again = func() (*kube.Process, error) { return kube.StartProxy(p.c.ControlPlane.Binary(), pc) }
	}
	c, err := p.c.Components.Add(proc, "kube-proxy on "+n.Name, again)
	if err != nil {
		return nil, err
	}
	took, err := kube.WaitProxy(ctx, proc, n.IP)
	if err != nil {
		// A kube-proxy that never made its first sync must not go on
		// programming the node under whatever runs there next.
		return nil, errors.Join(err, proc.Stop(context.Background()))
	}
	p.c.Logf("lab %s: kube-proxy (%s) on %s made its first sync %s after its start", p.c.ID, m.Name, n.Name, took.Round(time.Millisecond))
	if p.c.Phase != nil {
		p.c.Phase("kube-proxy on "+n.Name+": first sync", proc.Started)
	}
	return c, nil
}

// Sync waits until the node's dataplane says what kube-proxy must program for
// s, or says what differs when it does not within programmedWithin.
func (k *kubeProxy) Sync(ctx context.Context, s *proxy.State) error {
	want := proxy.ExpectedServiceMap(s, k.node, k.mode.Dataplane.Model)
	ctx, cancel := context.WithTimeout(ctx, programmedWithin)
	defer cancel()
	var diff []string
	for {
		got, err := k.mode.Read(k.ns, k.cfg)
		switch {
		case err != nil:
			// Read while kube-proxy rewrites what it reads: a netlink dump of
			// kube-ipvs0's addresses or of IPVS interrupted by a change
			// (NLM_F_DUMP_INTR), a set swapped under ipset. Read again until
			// the bound, which names the error if it lasts. Failing at once
			// failed the lab's whole change, a pod's readiness report among
			// them (its probe retries a period later, by when a restarted
			// pod may answer again): one way to what CI's VM saw once,
			// kube-proxy-ipvs's dataplane right and the lab's ports not.
			diff = []string{"read what kube-proxy programmed: " + err.Error()}
		default:
			if diff = proxy.DiffServiceMaps(want, got); len(diff) > 0 {
				break
			}
			if k.mode.Section != proxy.SectionIPVS {
				return nil
			}
			pending := ipvsSyncPending(k.ns, k.backend, got)
			if pending == "" {
				return nil
			}
			diff = []string{pending}
		}
		p := k.comp.Process()
		if err := p.Exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("kube-proxy (%s) has not programmed the Services after %s; what differs:\n  %s\n(its log: %s)",
				k.mode.Name, programmedWithin, strings.Join(diff, "\n  "), p.LogFile)
			if log, rerr := os.ReadFile(p.LogFile); rerr == nil {
				if hint := xtables.SendBufferHint(string(log)); hint != "" {
					err = fmt.Errorf("%w\nits log says iptables-restore failed with \"Message too long\": %s", err, hint)
				}
			}
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close releases the namespace handle; the process is stopped with the lab's
// other components.
func (k *kubeProxy) Close() error { return k.ns.Close() }
