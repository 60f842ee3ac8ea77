package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// controlPlane is a lab's running control plane: the API server on its embedded
// etcd and the controller manager's EndpointSlice controllers, in the control
// plane's namespace, and the client the lab applies itself through.
type controlPlane struct {
	binary     string
	pki        *kube.PKI
	api        kube.APIServerConfig
	kubeconfig string
	procs      []*kube.Process
	client     *cluster.Client
	watch      *cluster.Watch
	watchCtx   context.Context
	stopWatch  context.CancelFunc
	// following is closed when the goroutine following the API server ends.
	following chan struct{}
	// proxiesStarted receives the outcome of starting the real kube-proxies,
	// which runs beside the rest of the control plane's start; proxiesDone is
	// closed when that is over, and cancelStart stops it.
	proxiesStarted chan error
	proxiesDone    chan struct{}
	cancelStart    context.CancelFunc
	// changed is signalled (without blocking) on every change the watch sees.
	changed chan struct{}
}

// Kubeconfig is the path of the lab's admin kubeconfig; empty without a control
// plane. Its server is inside the lab: use it from a lab namespace (`svclab
// kubectl`).
func (l *Lab) Kubeconfig() string {
	if l.cp == nil {
		return ""
	}
	return l.cp.kubeconfig
}

// KubeBinary is the svclab-kube binary the lab runs its components from; empty
// without a control plane.
func (l *Lab) KubeBinary() string {
	if l.cp == nil {
		return ""
	}
	return l.cp.binary
}

// Client is the lab's client of its API server, whose connections open in the
// control plane's namespace; nil without a control plane. Objects written
// through it reach the proxies that follow the API server (kube-proxy), not
// the lab's topology.
func (l *Lab) Client() *cluster.Client {
	if l.cp == nil {
		return nil
	}
	return l.cp.client
}

// startControlPlane runs the API server and the controller manager in the control
// plane's namespace and connects to the API server from there.
func (l *Lab) startControlPlane(ctx context.Context) error {
	cp := l.topo.ControlPlane
	m, err := l.Member(cp.Name)
	if err != nil {
		return err
	}
	dir := record.RunDir(l.dir, l.ID)
	bin, err := kube.Binary(ctx, kube.Options{Path: l.opts.KubeBinary, Log: l.opts.Log})
	if err != nil {
		return err
	}
	l.cp = &controlPlane{binary: bin, changed: make(chan struct{}, 1)}
	pki, err := kube.NewPKI(kube.PKIConfig{Dir: filepath.Join(dir, "pki"), APIServer: cp.IP, ServiceCIDR: l.topo.ServiceCIDR})
	if err != nil {
		return err
	}
	l.cp.pki = pki
	l.cp.api = kube.APIServerConfig{
		Netns: m.NetNS, Address: cp.IP, ServiceCIDR: l.topo.ServiceCIDR, PKI: pki,
		Dir: filepath.Join(dir, "kube-apiserver"), LogFile: l.logFile("kube-apiserver"),
	}
	start := time.Now()
	api, err := kube.StartAPIServer(bin, l.cp.api)
	if err != nil {
		return err
	}
	// A static pod: its kubelet restarts it.
	_, err = l.addComponent(api, "kube-apiserver on "+cp.Name, func() (*kube.Process, error) { return kube.StartAPIServer(bin, l.cp.api) })
	if err != nil {
		return err
	}
	ready, err := kube.WaitAPIServer(ctx, api, l.cp.api)
	if err != nil {
		return err
	}
	l.logf("lab %s: kube-apiserver ready at %s in %s", l.ID, l.cp.api.URL(), ready.Round(time.Millisecond))
	l.cp.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := kube.WriteKubeconfig(l.cp.kubeconfig, l.topo.Name, l.cp.api.URL(), pki); err != nil {
		return err
	}
	if err := l.ledger.update(func(r *record.Lab) { r.Kubeconfig, r.KubeBinary = l.cp.kubeconfig, bin }); err != nil {
		return err
	}
	ca, err := os.ReadFile(pki.CACert)
	if err != nil {
		return err
	}
	l.cp.client, err = cluster.New(cluster.Config{Server: l.cp.api.URL(), CA: ca, Token: pki.AdminToken, Dial: traffic.Dialer(m.NetNS)})
	if err != nil {
		return err
	}
	// kube-proxy needs its Node (its address) and nothing else to start; its
	// first sync takes seconds, which the rest of the lab's objects need not
	// wait for.
	if err := l.writeNodes(ctx); err != nil {
		return err
	}
	if l.opts.KubeProxy != nil {
		startCtx, cancel := context.WithCancel(ctx)
		l.cp.cancelStart = cancel
		l.cp.proxiesStarted, l.cp.proxiesDone = make(chan error, 1), make(chan struct{})
		go func() {
			defer close(l.cp.proxiesDone)
			l.cp.proxiesStarted <- l.startKubeProxies(startCtx)
		}()
	}
	kcmConfig := kube.ControllerManagerConfig{Netns: m.NetNS, Kubeconfig: l.cp.kubeconfig, LogFile: l.logFile("kube-controller-manager")}
	kcm, err := kube.StartControllerManager(bin, kcmConfig)
	if err != nil {
		return err
	}
	_, err = l.addComponent(kcm, "kube-controller-manager on "+cp.Name, func() (*kube.Process, error) { return kube.StartControllerManager(bin, kcmConfig) })
	if err != nil {
		return err
	}
	l.cp.watchCtx, l.cp.stopWatch = context.WithCancel(context.Background())
	l.cp.watch, err = l.cp.client.Watch(l.cp.watchCtx, func() {
		select {
		case l.cp.changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	if err := l.applyTopology(ctx); err != nil {
		return err
	}
	l.logf("lab %s: control plane up, topology applied, in %s", l.ID, time.Since(start).Round(time.Millisecond))
	return nil
}

// logFile is where the component called name writes, in the lab's run directory.
func (l *Lab) logFile(name string) string {
	return filepath.Join(record.RunDir(l.dir, l.ID), name+".log")
}

// addComponent records a component process, so that `svclab clean` can end it
// should it outlive the lab's owner, and supervises it under name ("kube-proxy
// on node-1"), restarting it with restart after a death when restart is not nil.
func (l *Lab) addComponent(p *kube.Process, name string, restart supervise.Restart) (*supervise.Component, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.supervisor.Watch(name, p, restart)
	l.components = append(l.components, c)
	return c, l.ledger.update(func(r *record.Lab) {
		r.Components = append(r.Components, record.Component{Name: p.Name, Process: record.ProcessOf(p.Pid())})
	})
}

// stopFollowing stops the watch and waits until nothing syncs on its behalf, so
// that the proxiers can close; and stops and waits for the start of the
// kube-proxies, so that every process started is known to stopComponents.
func (l *Lab) stopFollowing() {
	if l.cp == nil {
		return
	}
	if l.cp.proxiesDone != nil {
		l.cp.cancelStart()
		<-l.cp.proxiesDone
	}
	if l.cp.stopWatch == nil {
		return
	}
	l.cp.stopWatch()
	if l.cp.following != nil {
		<-l.cp.following
	}
}

// stopComponents stops every component process.
func (l *Lab) stopComponents() error {
	// The lab goes with them, so nothing they would flush on the way out is
	// kept: a short grace, all at once.
	ctx, cancel := context.WithTimeout(context.Background(), componentStopGrace)
	defer cancel()
	errs := make([]error, len(l.components))
	var wg sync.WaitGroup
	for i, c := range l.components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Process().Stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// componentStopGrace is how long a component may take to end after SIGTERM
// when its lab goes down, before SIGKILL.
const componentStopGrace = time.Second

// writeNodes writes the lab's Nodes with the status a kubelet reports.
func (l *Lab) writeNodes(ctx context.Context) error {
	c := l.cp.client
	now := time.Now()
	for _, n := range l.topo.Nodes {
		node := cluster.Node(n, now)
		status := node.Status
		if err := c.Create(ctx, cluster.Nodes, node); err != nil {
			return err
		}
		node.Status = status
		if err := c.UpdateStatus(ctx, cluster.Nodes, node); err != nil {
			return err
		}
	}
	return nil
}

// applyTopology writes the rest of the topology into the API server as a cluster
// would hold it (the Nodes are there): its namespaces, its Pods with the status a
// kubelet reports, its Services as declared (the API server allocates what they
// leave out, and the topology takes those allocations), and the user's
// EndpointSlices.
func (l *Lab) applyTopology(ctx context.Context) error {
	c := l.cp.client
	t := l.topo
	for _, ns := range cluster.NamespacesOf(t) {
		if err := c.Ensure(ctx, cluster.Namespaces, ns); err != nil {
			return err
		}
	}
	// The controller manager makes every namespace's default service account,
	// but pods are admitted only once it exists: a lab's pods would race it.
	accounts := append([]string{metav1.NamespaceDefault}, namespaceNames(cluster.NamespacesOf(t))...)
	for _, p := range t.Pods {
		// kube-system's too: the lab's CoreDNS pods run there.
		if !slices.Contains(accounts, p.Namespace) {
			accounts = append(accounts, p.Namespace)
		}
	}
	for _, ns := range accounts {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if err := c.Ensure(ctx, cluster.ServiceAccounts, sa); err != nil {
			return err
		}
	}
	if err := l.writePods(ctx, t.Pods); err != nil {
		return err
	}
	var svcs []corev1.Service
	for _, declared := range t.DeclaredServices {
		svc := declared.DeepCopy()
		if svc.Namespace == "" {
			svc.Namespace = metav1.NamespaceDefault
		}
		if err := c.Create(ctx, cluster.Services, svc); err != nil {
			return err
		}
		// The API server takes no status on create: the file's ingress is
		// kept for the topology, which publishes it below.
		svc.Status = declared.Status
		svcs = append(svcs, *svc)
	}
	for i := range t.UserEndpointSlices {
		if err := c.Create(ctx, cluster.EndpointSlices, t.UserEndpointSlices[i].DeepCopy()); err != nil {
			return err
		}
	}
	l.mu.Lock()
	next := l.topo.Clone()
	err := next.SetServices(svcs)
	if err == nil {
		l.topo = next
	}
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("the API server's Services: %w", err)
	}
	for i := range svcs {
		svcs[i].Status = corev1.ServiceStatus{}
	}
	return l.publishIngress(ctx, svcs)
}

// writePods creates pods as the scheduler and the kubelet would leave them:
// bound to their node, running, with their address and readiness in their
// status. A terminating pod is deleted with a grace period nobody ends, so it
// keeps its deletionTimestamp, as while a kubelet waits for its containers.
func (l *Lab) writePods(ctx context.Context, pods []topology.Pod) error {
	c := l.cp.client
	now := time.Now()
	for _, p := range pods {
		n, _ := l.topo.Node(p.Node)
		pod := cluster.Pod(p)
		if err := c.Create(ctx, cluster.Pods, pod); err != nil {
			return err
		}
		pod.Status = cluster.PodStatus(p, n.IP.String(), now)
		if err := c.UpdateStatus(ctx, cluster.Pods, pod); err != nil {
			return err
		}
		if p.Terminating {
			if err := c.Delete(ctx, cluster.Pods, p.Namespace, p.Name, &terminatingGrace); err != nil {
				return err
			}
		}
	}
	return nil
}

func namespaceNames(nss []*corev1.Namespace) []string {
	names := make([]string, len(nss))
	for i, ns := range nss {
		names[i] = ns.Name
	}
	return names
}

// terminatingGrace keeps a deleted pod terminating for longer than any lab runs.
var terminatingGrace = int64(24 * 3600)
