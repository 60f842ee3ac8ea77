// Package clusterdns is the cluster DNS of a lab with a control plane: the
// topology's CoreDNS pods run the real CoreDNS (from the component binary, in
// the pod's own namespace, watching the API server through the pod's node)
// instead of svclab's servers, behind the kube-dns Service the topology
// applied through the API. svclab plays their kubelet: a pod is written not
// ready, becomes ready once CoreDNS answers, and from then on follows a
// readiness probe of CoreDNS's ready plugin, as kubeadm's Deployment declares
// it (httpGet /ready on 8181).
package clusterdns

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/components"
	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// The readiness probe. kubeadm's CoreDNS probe takes the defaults: every 10 s,
// 1 s timeout, ready after 1 success, not ready after 3 failures. A lab probes
// every second, so that a replica that stops answering leaves the Service in
// seconds rather than half a minute; the thresholds are the defaults.
const (
	dnsProbePeriod  = time.Second
	dnsProbeTimeout = time.Second
	dnsProbeFailure = 3
	dnsProbeSuccess = 1
	// dnsReadyWithin bounds CoreDNS's start: it is ready in well under a second
	// here, once its informers have listed the API server's objects; in svclab's
	// VM under TCG, beside three other TCG guests on 2 cores, it had not answered
	// its ready endpoint after 2 minutes.
	dnsReadyWithin = 5 * time.Minute
	// dnsStopGrace bounds a CoreDNS process's end when the lab goes down: its
	// 5 s lameduck serves clients during a rolling update, and a lab going down
	// has none, so it is not waited for at all (SIGTERM, then SIGKILL at once):
	// a second of it was most of a lab's down.
	dnsStopGrace = 0
	// podStatusWithin bounds the report of a restarted CoreDNS pod's restart
	// count through the API.
	podStatusWithin = 30 * time.Second
)

// dnsReplica is one CoreDNS pod's process and its probe.
type dnsReplica struct {
	pod  topology.Pod
	comp *supervise.Component
}

// Config is what a lab's cluster DNS is made of.
type Config struct {
	// ID names the lab in messages; Domain is the cluster domain; RunDir
	// the lab's run directory, where the Corefiles go.
	ID, Domain, RunDir string
	// Parallel bounds how many replicas are awaited at once.
	Parallel int
	Logf     func(format string, args ...any)
	// Lab is the lab: its members and its pods' readiness.
	Lab Lab
	// ControlPlane is what CoreDNS runs against.
	ControlPlane ControlPlane
	// Components are the lab's component processes, which its CoreDNS
	// processes join.
	Components *components.Set
	// Changes is the lab's changeMu: a pod status written here is written
	// between the lab's changes, never in the middle of one.
	Changes sync.Locker
}

// DNS is the part of a lab that runs its cluster DNS: the CoreDNS replicas
// and their readiness probes. Its lock guards the replicas, and is taken
// inside the lab's changeMu, never around it. A nil *DNS is a lab without
// cluster DNS: Ready, StartProbes, Restarted and Stop do nothing on it, and
// Replica finds none.
type DNS struct {
	Config

	mu       sync.Mutex
	replicas []*dnsReplica
	// stopProbes ends the readiness probes; probing is done when they have
	// returned.
	stopProbes context.CancelFunc
	probing    sync.WaitGroup
	// reporting is done when every restart count Restarted reports in the
	// background is written (or its context ended).
	reporting sync.WaitGroup
}

// New is the cluster DNS of c, with no replica started.
func New(c Config) *DNS { return &DNS{Config: c} }

// Lab is what the cluster DNS needs of its lab: the members' namespaces and
// the pods' readiness, reported as a kubelet reports it.
type Lab interface {
	Member(name string) (*member.Member, error)
	UpdatePod(ctx context.Context, key string, change func(p *topology.Pod)) error
}

// ControlPlane is what the cluster DNS needs of the control plane: the
// component binary, the kubeconfig CoreDNS reads the API server with, and a
// client that writes a pod's status.
type ControlPlane interface {
	Kubeconfig() string
	Binary() string
	Client() *cluster.Client
}

// coreDNSPods are the topology's CoreDNS pods.
func coreDNSPods(t *topology.Topology) []topology.Pod {
	var pods []topology.Pod
	for _, p := range t.Pods {
		if p.Component == topology.ComponentCoreDNS {
			pods = append(pods, p)
		}
	}
	return pods
}

// MarkStarting reports t's CoreDNS pods not ready, as a kubelet
// reports a pod whose readiness probe has not yet passed.
func MarkStarting(t *topology.Topology) error {
	for _, p := range coreDNSPods(t) {
		if err := t.UpdatePod(p.Key(), func(p *topology.Pod) { p.Ready = false }); err != nil {
			return err
		}
	}
	return nil
}

// Launch starts CoreDNS in every CoreDNS pod of t; with waitFor set (the
// kubeconfig, before the API server is ready) each waits for that file before
// it runs. Wait waits until each answers.
func (d *DNS) Launch(t *topology.Topology, waitFor string) error {
	bin := d.ControlPlane.Binary()
	for _, p := range coreDNSPods(t) {
		m, err := d.Lab.Member(p.Name)
		if err != nil {
			return err
		}
		cfg := kube.CoreDNSConfig{
			Name: "coredns " + p.Key(), Netns: m.NetNS,
			CorefileConfig: kube.CorefileConfig{Domain: d.Domain, Kubeconfig: d.ControlPlane.Kubeconfig()},
			Corefile:       filepath.Join(d.RunDir, "Corefile-"+p.Name),
			LogFile:        d.Components.LogFile(p.Name),
			WaitFor:        waitFor,
		}
		proc, err := kube.StartCoreDNS(bin, cfg)
		if err != nil {
			return err
		}
		// A Deployment's pod (restartPolicy Always): its kubelet restarts it.
		c, err := d.Components.Add(proc, "CoreDNS in pod "+p.Key(), func() (*kube.Process, error) { return kube.StartCoreDNS(bin, cfg) })
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.replicas = append(d.replicas, &dnsReplica{pod: p, comp: c})
		d.mu.Unlock()
	}
	return nil
}

// Wait waits until every replica launched answers.
func (d *DNS) Wait(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, dnsReadyWithin)
	defer cancel()
	return fanout.Each(wctx, d.Parallel, d.list(), func(ctx context.Context, r *dnsReplica) error {
		took, err := kube.WaitCoreDNS(ctx, r.comp.Process(), d.Domain)
		if err != nil {
			return fmt.Errorf("pod %s: %w", r.pod.Key(), err)
		}
		d.Logf("lab %s: CoreDNS in %s on %s answers %s after its start", d.ID, r.pod.Key(), r.pod.Node, took.Round(time.Millisecond))
		return nil
	})
}

// list is the replicas started so far; none of a nil DNS.
func (d *DNS) list() []*dnsReplica {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.replicas)
}

// Ready marks every replica's pod ready in t, once start saw each answer.
func (d *DNS) Ready(t *topology.Topology) error {
	for _, r := range d.list() {
		if err := t.UpdatePod(r.pod.Key(), func(p *topology.Pod) { p.Ready = true }); err != nil {
			return err
		}
	}
	return nil
}

// StartProbes starts the readiness probe of every CoreDNS pod; each replica
// is ready when it starts (start saw it answer).
func (d *DNS) StartProbes() {
	if d == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	d.stopProbes = cancel
	d.mu.Unlock()
	for _, r := range d.list() {
		d.probing.Add(1)
		go func() {
			defer d.probing.Done()
			d.probe(ctx, r)
		}()
	}
}

// probe is a kubelet's readiness prober for one CoreDNS pod: it asks the
// ready plugin every period and reports the pod not ready after
// dnsProbeFailure failures in a row, ready again after dnsProbeSuccess
// successes, through the API as a kubelet does.
func (d *DNS) probe(ctx context.Context, r *dnsReplica) {
	client := traffic.HTTPClient(r.comp.Process().Netns, dnsProbeTimeout)
	url := fmt.Sprintf("http://127.0.0.1:%d/ready", kube.CoreDNSReadyPort)
	ready, failures, successes := true, 0, 0
	tick := time.NewTicker(dnsProbePeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if probeOK(ctx, client, url) {
			successes, failures = successes+1, 0
		} else {
			failures, successes = failures+1, 0
		}
		switch {
		case ready && failures >= dnsProbeFailure:
			ready = false
		case !ready && successes >= dnsProbeSuccess:
			ready = true
		default:
			continue
		}
		d.Logf("lab %s: pod %s: readiness probe %s: %s", d.ID, r.pod.Key(), url, map[bool]string{true: "ready", false: "not ready"}[ready])
		err := d.Lab.UpdatePod(ctx, r.pod.Key(), func(p *topology.Pod) { p.Ready = ready })
		if err != nil && ctx.Err() == nil {
			// Not reported is not changed: the next period reports it again
			// (the counts that decided it keep holding), as a kubelet retries
			// a status update the API server did not take. Reported once and
			// lost, a stopped replica stayed an endpoint for good.
			d.Logf("lab %s: pod %s: report readiness (retried next period): %v", d.ID, r.pod.Key(), err)
			ready = !ready
		}
	}
}

// Restarted is told of every component's restart: a CoreDNS pod's status
// says its container's restart count, as its kubelet reports it (until ctx
// ends: the lab goes down). The report runs beside the supervisor, not in
// it: it waits for the lab's change lock, which a readiness report may hold
// for as long as the API server does not answer (dead too, its etcd unable
// to write: the spec of a full run directory), and a supervisor held that
// long neither counted the next restart nor let the lab go down (`svclab
// down` gave up after 30 s). Stop waits for it.
func (d *DNS) Restarted(ctx context.Context, c *supervise.Component) {
	for _, r := range d.list() {
		if r.comp != c {
			continue
		}
		d.reporting.Add(1)
		go func() {
			defer d.reporting.Done()
			within, cancel := context.WithTimeout(ctx, podStatusWithin)
			defer cancel()
			if n, err := d.reportRestarts(within, r.pod, c); err != nil && ctx.Err() == nil {
				d.Logf("lab %s: pod %s: report restart count %d: %v", d.ID, r.pod.Key(), n, err)
			}
		}()
	}
}

// reportRestarts writes a pod's container restart count into its status, as
// its kubelet does; under changeMu, so that no readiness report of the pod
// writes its status in between.
// The count is read under the lock: of two reports under way, the later
// one writes the latest count.
func (d *DNS) reportRestarts(ctx context.Context, p topology.Pod, c *supervise.Component) (int32, error) {
	d.Changes.Lock()
	defer d.Changes.Unlock()
	n := int32(c.Restarts())
	client := d.ControlPlane.Client()
	var pod corev1.Pod
	if err := client.Get(ctx, cluster.Pods, p.Namespace, p.Name, &pod); err != nil {
		return n, err
	}
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].RestartCount = n
	}
	return n, client.UpdateStatus(ctx, cluster.Pods, &pod)
}

// probeOK is one HTTP probe: a status from 200 to 399 within the timeout
// passes, as a kubelet's httpGet probe.
func probeOK(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// Stop ends the probes, then every CoreDNS process at once without waiting
// out its lameduck.
func (d *DNS) Stop() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	stopProbes := d.stopProbes
	d.mu.Unlock()
	if stopProbes != nil {
		stopProbes()
	}
	d.probing.Wait()
	// The supervisor is closed first (Lab.Down), which ends the reports'
	// context; the probes that held the change lock are over.
	d.reporting.Wait()
	replicas := d.list()
	ctx, cancel := context.WithTimeout(context.Background(), dnsStopGrace)
	defer cancel()
	return fanout.Each(context.Background(), len(replicas)+1, replicas, func(_ context.Context, r *dnsReplica) error {
		return r.comp.Process().Stop(ctx)
	})
}

// Replica is the CoreDNS process of the CoreDNS pod called pod (a name or
// namespace/name), for specs that stop it to see the lab follow.
func (d *DNS) Replica(pod string) (*kube.Process, error) {
	for _, r := range d.list() {
		if r.pod.Name == pod || r.pod.Key() == pod {
			return r.comp.Process(), nil
		}
	}
	if d == nil {
		return nil, fmt.Errorf("the lab has no cluster DNS")
	}
	return nil, fmt.Errorf("lab %s has no CoreDNS pod %q", d.ID, pod)
}
