package lab

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// The cluster DNS of a lab with a control plane: the topology's CoreDNS pods run
// the real CoreDNS (from the component binary, in the pod's own namespace,
// watching the API server through the pod's node) instead of svclab's servers,
// behind the kube-dns Service the topology applied through the API. svclab plays
// their kubelet: a pod is written not ready, becomes ready once CoreDNS answers,
// and from then on follows a readiness probe of CoreDNS's ready plugin, as
// kubeadm's Deployment declares it (httpGet /ready on 8181).

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
	// has none.
	dnsStopGrace = time.Second
)

// dnsReplica is one CoreDNS pod's process and its probe.
type dnsReplica struct {
	pod  topology.Pod
	comp *supervise.Component
}

// clusterDNS is a lab's running cluster DNS.
type clusterDNS struct {
	replicas []*dnsReplica
	// stopProbes ends the readiness probes; probing is done when they have
	// returned.
	stopProbes context.CancelFunc
	probing    sync.WaitGroup
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

// dnsPodsStarting marks the CoreDNS pods not ready, as a kubelet reports a pod
// whose readiness probe has not yet passed, before the topology reaches the API
// server.
func (l *Lab) dnsPodsStarting() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.topo.Clone()
	for _, p := range coreDNSPods(next) {
		if err := next.UpdatePod(p.Key(), func(p *topology.Pod) { p.Ready = false }); err != nil {
			return err
		}
	}
	l.topo = next
	return nil
}

// startDNS runs CoreDNS in every CoreDNS pod, waits until each answers, and
// reports them ready.
func (l *Lab) startDNS(ctx context.Context) error {
	pods := coreDNSPods(l.topo)
	l.dns = &clusterDNS{}
	dir := record.RunDir(l.dir, l.ID)
	for _, p := range pods {
		m := l.members[p.Name]
		cfg := kube.CoreDNSConfig{
			Name: "coredns " + p.Key(), Netns: m.NetNS,
			CorefileConfig: kube.CorefileConfig{Domain: l.topo.DNS.Domain, Kubeconfig: l.cp.kubeconfig},
			Corefile:       filepath.Join(dir, "Corefile-"+p.Name),
			LogFile:        l.components.logFile(p.Name),
		}
		proc, err := kube.StartCoreDNS(l.cp.binary, cfg)
		if err != nil {
			return err
		}
		// A Deployment's pod (restartPolicy Always): its kubelet restarts it.
		c, err := l.components.add(proc, "CoreDNS in pod "+p.Key(), func() (*kube.Process, error) { return kube.StartCoreDNS(l.cp.binary, cfg) })
		if err != nil {
			return err
		}
		l.dns.replicas = append(l.dns.replicas, &dnsReplica{pod: p, comp: c})
	}
	wctx, cancel := context.WithTimeout(ctx, dnsReadyWithin)
	defer cancel()
	err := forEach(wctx, l.parallel(), l.dns.replicas, func(ctx context.Context, r *dnsReplica) error {
		took, err := kube.WaitCoreDNS(ctx, r.comp.Process(), l.topo.DNS.Domain)
		if err != nil {
			return fmt.Errorf("pod %s: %w", r.pod.Key(), err)
		}
		l.logf("lab %s: CoreDNS in %s on %s answers %s after its start", l.ID, r.pod.Key(), r.pod.Node, took.Round(time.Millisecond))
		return nil
	})
	if err != nil {
		return err
	}
	return l.change(ctx, func(t *topology.Topology) error {
		for _, r := range l.dns.replicas {
			if err := t.UpdatePod(r.pod.Key(), func(p *topology.Pod) { p.Ready = true }); err != nil {
				return err
			}
		}
		return nil
	})
}

// startDNSProbes starts the readiness probe of every CoreDNS pod; each replica
// is ready when it starts (startDNS saw it answer).
func (l *Lab) startDNSProbes() {
	if l.dns == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.dns.stopProbes = cancel
	for _, r := range l.dns.replicas {
		l.dns.probing.Add(1)
		go func() {
			defer l.dns.probing.Done()
			l.probeDNS(ctx, r)
		}()
	}
}

// probeDNS is a kubelet's readiness prober for one CoreDNS pod: it asks the
// ready plugin every period and reports the pod not ready after
// dnsProbeFailure failures in a row, ready again after dnsProbeSuccess
// successes, through the API as a kubelet does.
func (l *Lab) probeDNS(ctx context.Context, r *dnsReplica) {
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
		l.logf("lab %s: pod %s: readiness probe %s: %s", l.ID, r.pod.Key(), url, map[bool]string{true: "ready", false: "not ready"}[ready])
		err := l.UpdatePod(ctx, r.pod.Key(), func(p *topology.Pod) { p.Ready = ready })
		if err != nil && ctx.Err() == nil {
			l.logf("lab %s: pod %s: report readiness: %v", l.ID, r.pod.Key(), err)
		}
	}
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

// stopDNS ends the probes, then every CoreDNS process at once without waiting
// out its lameduck.
func (l *Lab) stopDNS() error {
	if l.dns == nil {
		return nil
	}
	if l.dns.stopProbes != nil {
		l.dns.stopProbes()
	}
	l.dns.probing.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), dnsStopGrace)
	defer cancel()
	return forEach(context.Background(), len(l.dns.replicas)+1, l.dns.replicas, func(_ context.Context, r *dnsReplica) error {
		return r.comp.Process().Stop(ctx)
	})
}

// DNSReplica is the CoreDNS process of a CoreDNS pod of the lab, for specs that
// stop it to see the lab follow.
func (l *Lab) DNSReplica(pod string) (*kube.Process, error) {
	if l.dns != nil {
		for _, r := range l.dns.replicas {
			if r.pod.Name == pod || r.pod.Key() == pod {
				return r.comp.Process(), nil
			}
		}
	}
	return nil, fmt.Errorf("lab %s has no CoreDNS pod %q", l.ID, pod)
}
