package lab

import (
	"sort"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/record"
)

// Where a lab's start spends its time (issue 20): Up and the steps it runs
// record phases (the namespaces, the API server's readiness, each kube-proxy's
// first sync, each CoreDNS replica's readiness, the nodes programmed), which
// the lab's record keeps for `svclab up --timings` and `svclab ls --json`.

// Phase names that the lab records more than once take the member's name.
const (
	phaseBuild          = "namespaces and links"
	phaseAPIServer      = "component binary, PKI, kube-apiserver ready, Nodes written"
	phaseTopology       = "topology applied (namespaces, service accounts, Pods, Services)"
	phaseDNSAnswers     = "CoreDNS started, every replica answering"
	phaseDNSReady       = "CoreDNS pods reported ready, nodes synced"
	phaseProxiesStarted = "proxies started (each kube-proxy's first sync), every node programmed"
	phaseProgrammed     = "every node programmed"
	phaseServers        = "pod servers"
	phaseUp             = "lab up"
)

// timings are the phases recorded since start.
type timings struct {
	mu     sync.Mutex
	start  time.Time
	phases []record.Phase
	// done is set when Up has returned: later syncs are the lab's changes,
	// not its start.
	done bool
}

// add records the phase called name, begun at began and ended now.
func (t *timings) add(name string, began time.Time) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.phases = append(t.phases, record.Phase{Name: name, StartMS: began.Sub(t.start).Milliseconds(), TookMS: now.Sub(began).Milliseconds()})
}

// finish ends the recording and returns the phases by start, then end.
func (t *timings) finish() []record.Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	out := append([]record.Phase(nil), t.phases...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].StartMS != out[j].StartMS {
			return out[i].StartMS < out[j].StartMS
		}
		return out[i].StartMS+out[i].TookMS < out[j].StartMS+out[j].TookMS
	})
	return out
}
