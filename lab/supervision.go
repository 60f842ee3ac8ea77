package lab

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
)

// podStatusWithin bounds the report of a restarted CoreDNS pod's restart count
// through the API.
const podStatusWithin = 30 * time.Second

// componentDied is told of every component that ended without the lab
// stopping it: the owner's log says so with its status and when it restarts,
// and the record shows it to `svclab ls` as the lab's health.
func (l *Lab) componentDied(c *supervise.Component, d record.Death, restartIn time.Duration) {
	then := "not restarted"
	if restartIn > 0 {
		then = "restarting in " + restartIn.String() + " (back-off)"
	}
	l.logf("lab %s: %s (pid %d) exited %s; its log: %s; %s", l.ID, d.Component, d.PID, d.Status, d.Log, then)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return
	}
	l.record.Deaths = append(l.record.Deaths, d)
	l.writeRecordLocked("the death of " + c.Name)
}

// componentRestarted is told of a restart: the record names the new process
// (for `svclab clean`) and counts the restart, and a CoreDNS pod's status
// says its restart count through the API, as its kubelet reports it (until
// ctx ends: the lab goes down).
func (l *Lab) componentRestarted(ctx context.Context, c *supervise.Component, old *kube.Process) {
	p := c.Process()
	l.logf("lab %s: %s restarted (pid %d, restart %d)", l.ID, c.Name, p.Pid(), c.Restarts())
	l.mu.Lock()
	if !l.down {
		for i, rc := range l.record.Components {
			if rc.Process.PID == old.Pid() {
				l.record.Components[i].Process = record.ProcessOf(p.Pid())
			}
		}
		for i := len(l.record.Deaths) - 1; i >= 0; i-- {
			if d := &l.record.Deaths[i]; d.Component == c.Name && d.Restarted == nil {
				now := time.Now()
				d.Restarted = &now
				break
			}
		}
		l.writeRecordLocked("the restart of " + c.Name)
	}
	l.mu.Unlock()
	for _, r := range l.dnsReplicas() {
		if r.comp != c {
			continue
		}
		within, cancel := context.WithTimeout(ctx, podStatusWithin)
		n := int32(c.Restarts())
		if err := l.reportRestarts(within, r.pod, n); err != nil && ctx.Err() == nil {
			l.logf("lab %s: pod %s: report restart count %d: %v", l.ID, r.pod.Key(), n, err)
		}
		cancel()
	}
}

// reportRestarts writes a pod's container restart count into its status, as
// its kubelet does; under changeMu, so that no readiness report of the pod
// writes its status in between.
func (l *Lab) reportRestarts(ctx context.Context, p topology.Pod, n int32) error {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	var pod corev1.Pod
	if err := l.cp.client.Get(ctx, cluster.Pods, p.Namespace, p.Name, &pod); err != nil {
		return err
	}
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].RestartCount = n
	}
	return l.cp.client.UpdateStatus(ctx, cluster.Pods, &pod)
}

// keepRestartCounts carries the restart counts of old's containers into
// status, which the lab writes anew when a pod's readiness changes.
func keepRestartCounts(status *corev1.PodStatus, old corev1.PodStatus) {
	for i := range status.ContainerStatuses {
		for _, o := range old.ContainerStatuses {
			if o.Name == status.ContainerStatuses[i].Name {
				status.ContainerStatuses[i].RestartCount = o.RestartCount
			}
		}
	}
}

// componentRestartFailed is told of a restart that could not start the
// process.
func (l *Lab) componentRestartFailed(c *supervise.Component, err error, retryIn time.Duration) {
	l.logf("lab %s: restart %s: %v; trying again in %s (back-off)", l.ID, c.Name, err, retryIn)
}

// writeRecordLocked writes the record, with l.mu held; a failure is logged,
// for the lab runs on.
func (l *Lab) writeRecordLocked(what string) {
	if err := record.Write(l.dir, l.record); err != nil {
		l.logf("lab %s: record %s: %v", l.ID, what, err)
	}
}

// dnsReplicas are the lab's CoreDNS replicas; none without a cluster DNS.
func (l *Lab) dnsReplicas() []*dnsReplica {
	if l.dns == nil {
		return nil
	}
	return l.dns.replicas
}

// Deaths lists the components of the lab that ended without the lab stopping
// them (killed, crashed), seen at or after since; a restarted one too.
func (l *Lab) Deaths(since time.Time) []record.Death { return l.supervisor.Deaths(since) }
