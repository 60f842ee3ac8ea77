// Package controlplane is a lab's control plane: the API server on its
// embedded etcd and the controller manager, in the control plane's namespace,
// and the client and watch the lab keeps the API server and its topology in
// step with (apiserver.go).
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/components"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// ControlPlane is a lab's running control plane: the API server on its embedded
// etcd and the controller manager's EndpointSlice controllers, in the control
// plane's namespace, and the client the lab applies itself through. It mirrors
// the topology's Services and EndpointSlices into the API server and the API
// server's Services back into the topology (apiserver.go). Its fields are set
// while the lab comes up, before anything runs beside it, and read after.
type ControlPlane struct {
	host  Host
	rec   components.Recorder
	logf  func(format string, args ...any)
	comps *components.Set
	// id names the lab in messages; name is the topology's, the cluster's in
	// the kubeconfig.
	id, name string
	runDir   string
	// kubeBinary and log are the lab's options for finding the component
	// binary.
	kubeBinary string
	log        io.Writer

	binary     string
	pki        *kube.PKI
	api        kube.APIServerConfig
	kubeconfig string
	client     *cluster.Client
	watch      *cluster.Watch
	watchCtx   context.Context
	stopWatch  context.CancelFunc
	// following is closed when the goroutine following the API server ends.
	following chan struct{}
	// changed is signalled (without blocking) on every change the watch sees.
	changed chan struct{}
	// started is when the API server was started.
	started time.Time
	// apiServer is the API server's process.
	apiServer *supervise.Component
	// waitFor says the component binary takes --wait-for: the components
	// are forked while the API server starts, so that their initialisation
	// (seconds of CPU each on a loaded machine) overlaps with its start, and
	// they run once the kubeconfig is written.
	waitFor bool
}

// Config is what a lab's control plane is made of.
type Config struct {
	// Host is the lab: its topology and members.
	Host Host
	// Record is the lab's record; Logf writes a line to the owner's log.
	Record components.Recorder
	Logf   func(format string, args ...any)
	// Components are the lab's component processes, which the API server
	// and the controller manager join.
	Components *components.Set
	// ID names the lab in messages; Name is the topology's, the cluster's
	// in the kubeconfig; RunDir is the lab's run directory.
	ID, Name, RunDir string
	// KubeBinary and Log are the lab's options for finding the component
	// binary (kube.Options).
	KubeBinary string
	Log        io.Writer
}

// New is the control plane of c, not started.
func New(c Config) *ControlPlane {
	return &ControlPlane{host: c.Host, rec: c.Record, logf: c.Logf, comps: c.Components, id: c.ID, name: c.Name, runDir: c.RunDir, kubeBinary: c.KubeBinary, log: c.Log}
}

// Host is what the control plane needs of its lab: a snapshot of the
// topology (the lab replaces its topology whole and never changes one in
// place, so a snapshot is read without a lock and must not be changed), a
// change of a copy made the lab's under its lock (when fn fails the topology
// stays as it was), and a copy of the member called name.
type Host interface {
	Snapshot() *topology.Topology
	UpdateTopology(fn func(t *topology.Topology) error) error
	Member(name string) (*member.Member, error)
}

// WaitsFor says the component binary takes --wait-for: the other components
// may be forked before the API server is ready.
func (c *ControlPlane) WaitsFor() bool { return c.waitFor }

// Watch is the watch the lab follows the API server with, once StartWatch
// has started it.
func (c *ControlPlane) Watch() *cluster.Watch { return c.watch }

// DeleteService deletes the Service namespace/name from the API server.
func (c *ControlPlane) DeleteService(ctx context.Context, namespace, name string) error {
	return c.client.Delete(ctx, cluster.Services, namespace, name, nil)
}

// Kubeconfig is the path of the lab's admin kubeconfig; empty without a control
// plane. Its server is inside the lab: use it from a lab namespace (`svclab
// kubectl`).
func (c *ControlPlane) Kubeconfig() string {
	if c == nil {
		return ""
	}
	return c.kubeconfig
}

// Binary is the svclab-kube binary the lab runs its components from; empty
// without a control plane.
func (c *ControlPlane) Binary() string {
	if c == nil {
		return ""
	}
	return c.binary
}

// Client is the lab's client of its API server, whose connections open in the
// control plane's namespace; nil without a control plane. Objects written
// through it reach the proxies that follow the API server (kube-proxy), not
// the lab's topology.
func (c *ControlPlane) Client() *cluster.Client {
	if c == nil {
		return nil
	}
	return c.client
}

// StartAPIServer starts the API server in the control plane's namespace and
// returns once the component binary is known good; waitFor then says whether
// the other components may be forked before the API server is ready (they
// wait for the kubeconfig, which ready writes last).
func (c *ControlPlane) StartAPIServer(ctx context.Context) error {
	t := c.host.Snapshot()
	cp := t.ControlPlane
	m, err := c.host.Member(cp.Name)
	if err != nil {
		return err
	}
	// A given binary's check runs beside the API server's start, which it
	// must pass before the lab waits for the API server.
	bin, checked, err := kube.BinaryChecked(ctx, kube.Options{Path: c.kubeBinary, Log: c.log})
	if err != nil {
		return err
	}
	c.binary, c.changed = bin, make(chan struct{}, 1)
	// Its path is known now; the file is written once the API server is
	// ready and the Nodes are there, and the components wait for it.
	c.kubeconfig = filepath.Join(c.runDir, "kubeconfig")
	pki, err := kube.NewPKI(kube.PKIConfig{Dir: filepath.Join(c.runDir, "pki"), APIServer: cp.IP, ServiceCIDR: t.ServiceCIDR})
	if err != nil {
		return err
	}
	c.pki = pki
	c.api = kube.APIServerConfig{
		Netns: m.NetNS, Address: cp.IP, ServiceCIDR: t.ServiceCIDR, PKI: pki, NodePortRange: t.NodePortRange.String(),
		Dir: filepath.Join(c.runDir, "kube-apiserver"), LogFile: c.comps.LogFile("kube-apiserver"),
	}
	c.started = time.Now()
	api, err := kube.StartAPIServer(bin, c.api)
	if err != nil {
		// A binary that is no component binary says so, not how it failed.
		return errors.Join((<-checked).Err, err)
	}
	// A static pod: its kubelet restarts it.
	c.apiServer, err = c.comps.Add(api, "kube-apiserver on "+cp.Name, func() (*kube.Process, error) { return kube.StartAPIServer(bin, c.api) })
	if err != nil {
		return err
	}
	check := <-checked
	if check.Err != nil {
		return check.Err
	}
	c.waitFor = check.WaitFor
	return nil
}

// Ready waits until the API server is ready, connects to it from the control
// plane's namespace, writes the lab's Nodes (what kube-proxy needs to start)
// and then the kubeconfig, which the components forked before wait for.
func (c *ControlPlane) Ready(ctx context.Context) error {
	t := c.host.Snapshot()
	m, err := c.host.Member(t.ControlPlane.Name)
	if err != nil {
		return err
	}
	took, err := kube.WaitAPIServer(ctx, c.apiServer.Process(), c.api)
	if err != nil {
		return err
	}
	c.logf("lab %s: kube-apiserver ready at %s in %s", c.id, c.api.URL(), took.Round(time.Millisecond))
	ca, err := os.ReadFile(c.pki.CACert)
	if err != nil {
		return err
	}
	c.client, err = cluster.New(cluster.Config{Server: c.api.URL(), CA: ca, Token: c.pki.AdminToken, Dial: traffic.Dialer(m.NetNS)})
	if err != nil {
		return err
	}
	if err := c.writeNodes(ctx, t.Nodes); err != nil {
		return err
	}
	if err := kube.WriteKubeconfig(c.kubeconfig, c.name, c.api.URL(), c.pki); err != nil {
		return err
	}
	return c.rec.Update(func(r *record.Lab) { r.Kubeconfig, r.KubeBinary = c.kubeconfig, c.binary })
}

// WaitForKubeconfig is the file a component forked now waits for: the
// kubeconfig, when the binary takes --wait-for; "" when it does not (the
// component is then started only once the kubeconfig is there).
func (c *ControlPlane) WaitForKubeconfig() string {
	if !c.waitFor {
		return ""
	}
	return c.kubeconfig
}

// ProxyGate is the file the kube-proxies forked early wait for ("" when
// they are not forked early): written once the lab's objects are in the API
// server, its Pods' readiness reported and the controller's EndpointSlices
// made (OpenProxyGate). kube-proxy's first sync then programs the whole
// topology at once: started with the API server, it synced the empty cluster
// and then every change of the lab's start, the third and later of them a
// minSyncPeriod (1 s) apart, which cost a lab 1-2 s.
func (c *ControlPlane) ProxyGate() string {
	if !c.waitFor {
		return ""
	}
	return filepath.Join(c.runDir, "kube-proxy.gate")
}

// OpenProxyGate lets the kube-proxies forked early run.
func (c *ControlPlane) OpenProxyGate() error {
	gate := c.ProxyGate()
	if gate == "" {
		return nil
	}
	return os.WriteFile(gate, nil, 0o644)
}

// StartControllerManager runs the controller manager, which waits for the
// kubeconfig when it is started before the API server is ready.
func (c *ControlPlane) StartControllerManager() error {
	cp := c.host.Snapshot().ControlPlane
	m, err := c.host.Member(cp.Name)
	if err != nil {
		return err
	}
	kcmConfig := kube.ControllerManagerConfig{Netns: m.NetNS, Kubeconfig: c.kubeconfig, LogFile: c.comps.LogFile("kube-controller-manager"), WaitFor: c.WaitForKubeconfig()}
	kcm, err := kube.StartControllerManager(c.binary, kcmConfig)
	if err != nil {
		return err
	}
	_, err = c.comps.Add(kcm, "kube-controller-manager on "+cp.Name, func() (*kube.Process, error) { return kube.StartControllerManager(c.binary, kcmConfig) })
	return err
}

// StartWatch starts the watch the lab follows the API server with.
func (c *ControlPlane) StartWatch() error {
	var err error
	c.watchCtx, c.stopWatch = context.WithCancel(context.Background())
	c.watch, err = c.client.Watch(c.watchCtx, func() {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	})
	return err
}

// StopFollowing stops the watch and waits until nothing syncs on its behalf, so
// that the proxiers can close.
func (c *ControlPlane) StopFollowing() {
	if c.stopWatch == nil {
		return
	}
	c.stopWatch()
	if c.following != nil {
		<-c.following
	}
}

// writeNodes writes the lab's Nodes with the status a kubelet reports.
func (c *ControlPlane) writeNodes(ctx context.Context, nodes []topology.Node) error {
	now := time.Now()
	for _, n := range nodes {
		node := cluster.Node(n, now)
		status := node.Status
		if err := c.client.Create(ctx, cluster.Nodes, node); err != nil {
			return err
		}
		node.Status = status
		if err := c.client.UpdateStatus(ctx, cluster.Nodes, node); err != nil {
			return err
		}
	}
	return nil
}

// ApplyTopology writes the rest of the topology into the API server as a cluster
// would hold it (the Nodes are there): its namespaces, its Pods as writePods
// (the kubelet's role) writes them, its Services as declared (the API server
// allocates what they leave out, and the topology takes those allocations), and
// the user's EndpointSlices.
func (c *ControlPlane) ApplyTopology(ctx context.Context, writePods func(context.Context, *topology.Topology, []topology.Pod) error) error {
	t := c.host.Snapshot()
	for _, ns := range cluster.NamespacesOf(t) {
		if err := c.client.Ensure(ctx, cluster.Namespaces, ns); err != nil {
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
		if err := c.client.Ensure(ctx, cluster.ServiceAccounts, sa); err != nil {
			return err
		}
	}
	if err := writePods(ctx, t, t.Pods); err != nil {
		return err
	}
	var svcs []corev1.Service
	for _, declared := range t.DeclaredServices {
		svc := declared.DeepCopy()
		if svc.Namespace == "" {
			svc.Namespace = metav1.NamespaceDefault
		}
		if err := c.client.Create(ctx, cluster.Services, svc); err != nil {
			return err
		}
		// The API server takes no status on create: the file's ingress is
		// kept for the topology, which publishes it below.
		svc.Status = declared.Status
		svcs = append(svcs, *svc)
	}
	for i := range t.UserEndpointSlices {
		if err := c.client.Create(ctx, cluster.EndpointSlices, t.UserEndpointSlices[i].DeepCopy()); err != nil {
			return err
		}
	}
	err := c.host.UpdateTopology(func(next *topology.Topology) error { return next.SetServices(svcs) })
	if err != nil {
		return fmt.Errorf("the API server's Services: %w", err)
	}
	for i := range svcs {
		svcs[i].Status = corev1.ServiceStatus{}
	}
	if err := c.publishIngress(ctx, svcs); err != nil {
		return err
	}
	c.logf("lab %s: control plane up, topology applied, in %s", c.id, time.Since(c.started).Round(time.Millisecond))
	return nil
}

func namespaceNames(nss []*corev1.Namespace) []string {
	names := make([]string, len(nss))
	for i, ns := range nss {
		names[i] = ns.Name
	}
	return names
}
