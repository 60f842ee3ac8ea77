// Package kubelet plays the kubelet's role for a lab's pods: with a control
// plane it reports them to the API server as a kubelet does, and it writes
// what a kubelet gives a pod's containers besides the network (their service
// environment and resolv.conf), which `svclab exec` gives a command in a pod.
package kubelet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/controlplane"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// Kubelet plays the kubelet's role for the lab's pods: with a control plane, it
// reports them to the API server as a kubelet does (bound, running, their
// address, readiness and deletion), and it writes what a kubelet gives a pod's
// containers besides the network (below). Its state is on disk, in the pods'
// directories of the lab's run directory.
type Kubelet struct {
	host Host
	// dir and id are the lab's record directory and id.
	dir, id string
	// cp is the lab's control plane, nil without one.
	cp *controlplane.ControlPlane
}

// Host is what the kubelet's role needs of its lab: a snapshot of its
// topology (never changed in place, read without a lock).
type Host interface {
	Snapshot() *topology.Topology
}

// New is the kubelet's role in the lab recorded in dir as id, whose control
// plane is cp (nil without one).
func New(host Host, dir, id string, cp *controlplane.ControlPlane) *Kubelet {
	return &Kubelet{host: host, dir: dir, id: id, cp: cp}
}

// WritePods creates pods as the scheduler and the kubelet would leave them:
// bound to their node, running, with their address and readiness in their
// status (their nodes looked up in t). A terminating pod is deleted with a grace period nobody ends, so it
// keeps its deletionTimestamp, as while a kubelet waits for its containers.
func (k *Kubelet) WritePods(ctx context.Context, t *topology.Topology, pods []topology.Pod) error {
	c := k.cp.Client()
	now := time.Now()
	for _, p := range pods {
		n, _ := t.Node(p.Node)
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

// PublishPods writes the pod changes from before to after into the API server.
func (k *Kubelet) PublishPods(ctx context.Context, before, after *topology.Topology) error {
	c := k.cp.Client()
	old := map[string]topology.Pod{}
	for _, p := range before.Pods {
		old[p.Key()] = p
	}
	var added []topology.Pod
	for _, p := range after.Pods {
		prev, ok := old[p.Key()]
		delete(old, p.Key())
		switch {
		case !ok:
			added = append(added, p)
		case reflect.DeepEqual(prev, p):
		default:
			if err := k.updatePod(ctx, after, prev, p); err != nil {
				return err
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(old)) {
		p := old[key]
		if err := c.Delete(ctx, cluster.Pods, p.Namespace, p.Name, new(int64)); err != nil {
			return err
		}
	}
	return k.WritePods(ctx, after, added)
}

// updatePod writes a pod's new labels, readiness or termination; its node is
// looked up in t.
func (k *Kubelet) updatePod(ctx context.Context, t *topology.Topology, prev, p topology.Pod) error {
	c := k.cp.Client()
	var pod corev1.Pod
	if err := c.Get(ctx, cluster.Pods, p.Namespace, p.Name, &pod); err != nil {
		return err
	}
	if !maps.Equal(prev.Labels, p.Labels) {
		pod.Labels = p.Labels
		if err := c.Update(ctx, cluster.Pods, &pod); err != nil {
			return err
		}
	}
	if prev.Ready != p.Ready {
		n, _ := t.Node(p.Node)
		status := cluster.PodStatus(p, n.IP.String(), time.Now())
		keepRestartCounts(&status, pod.Status)
		pod.Status = status
		if err := c.UpdateStatus(ctx, cluster.Pods, &pod); err != nil {
			return err
		}
	}
	if p.Terminating && !prev.Terminating {
		return c.Delete(ctx, cluster.Pods, p.Namespace, p.Name, &terminatingGrace)
	}
	if prev.Terminating && !p.Terminating {
		return fmt.Errorf("pod %s: a pod being deleted cannot be undeleted", p.Key())
	}
	return nil
}

// What a kubelet and its container runtime give a pod's containers besides the
// network: the service environment variables (pkg/kubelet/envvars) and, with the
// ClusterFirst DNS policy, a resolv.conf naming the cluster DNS
// (pkg/kubelet/network/dns). The lab writes both when a pod starts, into the pod's
// directory of its run directory, and `svclab exec` gives them to the command it
// runs in the pod. Like a container's, the environment is the one of the pod's
// start: a Service made later is not in it (DNS finds it). Nodes keep the host's
// resolv.conf and environment, and so do CoreDNS pods (kubeadm runs them with
// dnsPolicy: Default).

// Files of a pod's directory.
const (
	podEnvFile        = "env"
	podResolvConfFile = "resolv.conf"
	// hostResolvConf is the file kubelet's --resolv-conf names by default, whose
	// search domains a pod's resolv.conf carries after the cluster's.
	hostResolvConf = "/etc/resolv.conf"
)

// Limits kubelet holds a pod's search line to (pkg/apis/core/validation,
// MaxDNSSearchPaths and MaxDNSSearchListChars; a domain longer than a DNS name
// is dropped, since glibc 2.28 aborts on one).
const (
	maxSearchPaths     = 32
	maxSearchListChars = 2048
	maxSearchDomain    = 253
)

// podDir is the directory of a pod's files in the lab recorded in dir as id.
func podDir(dir, id, pod string) string { return filepath.Join(record.RunDir(dir, id), "pods", pod) }

// WritePodFiles writes each pod's environment and, in a lab with cluster DNS,
// its resolv.conf, from the Services the cluster has now: the API server's with
// a control plane (the kubernetes Service among them), else the topology's.
func (k *Kubelet) WritePodFiles(pods []topology.Pod) error {
	var svcs []corev1.Service
	t := k.host.Snapshot()
	if k.cp != nil {
		var err error
		if svcs, err = k.cp.Watch().Services(); err != nil {
			return err
		}
	} else {
		svcs = t.Services
	}
	dns := t.DNS
	var host []string
	if dns != nil {
		var err error
		if host, err = hostSearches(hostResolvConf); err != nil {
			return err
		}
	}
	for _, p := range pods {
		d := podDir(k.dir, k.id, p.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("pod %s: %w", p.Key(), err)
		}
		env := strings.Join(ServiceEnv(p.Namespace, svcs), "\n") + "\n"
		if err := os.WriteFile(filepath.Join(d, podEnvFile), []byte(env), 0o644); err != nil {
			return fmt.Errorf("pod %s: %w", p.Key(), err)
		}
		if dns == nil || p.Component != "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, podResolvConfFile), []byte(ResolvConf(dns, p.Namespace, host)), 0o644); err != nil {
			return fmt.Errorf("pod %s: %w", p.Key(), err)
		}
	}
	return nil
}

// RemovePodFiles removes a deleted pod's files.
func (k *Kubelet) RemovePodFiles(pod string) error {
	return os.RemoveAll(podDir(k.dir, k.id, pod))
}

// ServiceEnv is the service environment of a container in namespace ns, as
// kubelet makes it (getServiceEnvVarMap, envvars.FromServices): for every Service
// with a ClusterIP in ns, and the master Service default/kubernetes whatever ns
// (unless ns has a Service of that name), NAME_SERVICE_HOST, NAME_SERVICE_PORT
// (the first port), NAME_SERVICE_PORT_PORTNAME for each named port, and Docker's
// link variables NAME_PORT and NAME_PORT_PORT_PROTO{,_PROTO,_PORT,_ADDR}; names
// upper-cased with '-' as '_'. Sorted KEY=VALUE lines.
func ServiceEnv(ns string, svcs []corev1.Service) []string {
	byName := map[string]*corev1.Service{}
	for i := range svcs {
		s := &svcs[i]
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		switch {
		case s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes":
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		case s.Namespace == ns:
			byName[s.Name] = s
		}
	}
	var env []string
	set := func(k, v string) { env = append(env, k+"="+v) }
	for _, s := range byName {
		prefix := envName(s.Name)
		ip := s.Spec.ClusterIP
		set(prefix+"_SERVICE_HOST", ip)
		set(prefix+"_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port)))
		for i, p := range s.Spec.Ports {
			if p.Name != "" {
				set(prefix+"_SERVICE_PORT_"+envName(p.Name), strconv.Itoa(int(p.Port)))
			}
			proto := string(p.Protocol)
			if proto == "" {
				proto = string(corev1.ProtocolTCP)
			}
			url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
			if i == 0 {
				set(prefix+"_PORT", url)
			}
			pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
			set(pp, url)
			set(pp+"_PROTO", strings.ToLower(proto))
			set(pp+"_PORT", strconv.Itoa(int(p.Port)))
			set(pp+"_ADDR", ip)
		}
	}
	slices.Sort(env)
	return env
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// ResolvConf is the resolv.conf a container runtime writes for a pod in
// namespace ns with the ClusterFirst policy, from what kubelet hands it: the
// cluster DNS as the only nameserver, the cluster's search domains followed by
// the host's (duplicates dropped, within kubelet's limits), and ndots:5 as the
// only option. Written in containerd's order: search, nameserver, options.
func ResolvConf(d *topology.DNS, ns string, hostSearch []string) string {
	var search []string
	for _, s := range append(d.Searches(ns), hostSearch...) {
		if !slices.Contains(search, s) && len(s) <= maxSearchDomain {
			search = append(search, s)
		}
	}
	if len(search) > maxSearchPaths {
		search = search[:maxSearchPaths]
	}
	for len(strings.Join(search, " ")) > maxSearchListChars {
		search = search[:len(search)-1]
	}
	return "search " + strings.Join(search, " ") + "\nnameserver " + d.ServiceIP.String() + "\noptions ndots:5\n"
}

// hostSearches reads the search domains of the host's resolv.conf as kubelet
// does: the last search line wins, "." is dropped, and a domain's final dot too.
// A host without the file has none.
func hostSearches(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var search []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "search" {
			continue
		}
		search = nil
		for _, s := range fields[1:] {
			if s != "." {
				search = append(search, strings.TrimSuffix(s, "."))
			}
		}
	}
	return search, sc.Err()
}

// PodResolvConf is the resolv.conf the lab wrote for a pod, nil when the pod
// keeps the host's (no cluster DNS, or a CoreDNS pod).
func (k *Kubelet) PodResolvConf(pod string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(podDir(k.dir, k.id, pod), podResolvConfFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// ExecContext is what `svclab exec` gives a command in the member name of the lab
// recorded in dir as r: for a pod, its service environment added to env and its
// resolv.conf (when it has one of its own) bound over /etc/resolv.conf; for
// other members, env as it is.
func ExecContext(dir string, r *record.Lab, name string, env []string) ([]string, []namespaces.Bind, error) {
	m, ok := r.Member(name)
	if !ok || m.Kind != member.KindPod {
		return env, nil, nil
	}
	d := podDir(dir, r.ID, name)
	b, err := os.ReadFile(filepath.Join(d, podEnvFile))
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s of lab %s: its environment: %w", name, r.ID, err)
	}
	var pod []string
	set := map[string]bool{}
	for _, kv := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, _, ok := strings.Cut(kv, "="); ok {
			pod, set[k] = append(pod, kv), true
		}
	}
	// The pod's values win: a program reading its environment takes the first
	// of two.
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return set[k]
	})
	env = append(env, pod...)
	var binds []namespaces.Bind
	resolv := filepath.Join(d, podResolvConfFile)
	if _, err := os.Stat(resolv); err == nil {
		binds = append(binds, namespaces.Bind{Source: resolv, Target: hostResolvConf})
	}
	return env, binds, nil
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

// terminatingGrace keeps a deleted pod terminating for longer than any lab runs.
var terminatingGrace = int64(24 * 3600)
