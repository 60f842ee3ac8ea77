// Package record keeps what a lab is made of on disk, written before anything is
// created, so that `svclab down` and `svclab clean` find it after its process was
// killed: the lab's namespaces, the processes it started, its owner.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultDir is where labs are recorded, so that `svclab down` and `svclab
// clean` find what a lab created even after its process was killed with SIGKILL.
const DefaultDir = "/run/svclab"

// Lab is what a lab writes about itself before it creates anything.
type Lab struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	RunID  string `json:"runID"`
	Source string `json:"source"`
	Mode   string `json:"mode"`
	// Backend is the xtables backend the mode writes with; KubeProxy tells
	// that the real kube-proxy programs the nodes.
	Backend   string `json:"backend,omitempty"`
	KubeProxy bool   `json:"kubeProxy,omitempty"`
	// Kubeconfig and KubeBinary are the control plane's admin kubeconfig and the
	// component binary (its kubectl), when the lab has a control plane.
	Kubeconfig string    `json:"kubeconfig,omitempty"`
	KubeBinary string    `json:"kubeBinary,omitempty"`
	Created    time.Time `json:"created"`
	// Owner is the process that holds the lab: it serves the pods and tears the lab
	// down. A lab whose owner is gone is a leftover.
	Owner   Process  `json:"owner"`
	Members []Member `json:"members"`
	// Components are the processes the lab runs in its namespaces (the API
	// server, kube-proxy, ...). They die with the owner; `svclab clean` ends any
	// that outlived it, by pid and start time.
	Components []Component `json:"components,omitempty"`
	// Deaths are the components that ended without the lab stopping them.
	Deaths []Death `json:"deaths,omitempty"`
	// Services are the Service ports the lab's proxies programmed when it came
	// up, as `svclab up` printed them (`svclab inspect` prints them again).
	Services []Service `json:"services,omitempty"`
	// Timings are the phases of the lab's start and how long each took
	// (`svclab up --timings` prints them).
	Timings []Phase `json:"timings,omitempty"`
	// Stale is set, in what a running lab's owner answers (Live), when the
	// record on disk is behind the lab; the file on disk never has it.
	Stale *Stale `json:"recordStale,omitempty"`
}

// Phase is one phase of a lab's start: when it began, counted from the start
// of the lab's build, and how long it took, in milliseconds. Phases the lab
// runs side by side overlap.
type Phase struct {
	Name    string `json:"name"`
	StartMS int64  `json:"startMs"`
	TookMS  int64  `json:"tookMs"`
}

// Service is one port of a Service, as kubectl get svc shows it.
type Service struct {
	Name      string `json:"name"`
	ClusterIP string `json:"clusterIP"`
	// External are the load balancer ingress IPs, then the external IPs.
	External  []string `json:"external,omitempty"`
	Port      int      `json:"port"`
	Protocol  string   `json:"protocol"`
	NodePort  int      `json:"nodePort,omitempty"`
	Endpoints []string `json:"endpoints"`
}

// Component is one component process of a lab.
type Component struct {
	Name    string  `json:"name"`
	Process Process `json:"process"`
}

// Member is one namespace of a lab.
type Member struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	NetNS string `json:"netns"`
	IP    string `json:"ip,omitempty"`
	Node  string `json:"node,omitempty"`
}

// Process identifies a process across PID reuse by its start time.
type Process struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Self is the calling process.
func Self() Process { return ProcessOf(os.Getpid()) }

// ProcessOf identifies the running process pid.
func ProcessOf(pid int) Process {
	p := Process{PID: pid}
	st, _ := readStat(pid)
	p.Start = st.start
	return p
}

// Alive tells whether the process still runs (and is the same process). A
// zombie does not: it has ended and only waits for its parent to reap it, which
// for a killed `svclab up` owner can take a second or two, while its pod servers
// are gone already.
func (p Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	st, err := readStat(p.PID)
	return err == nil && st.start == p.Start && st.state != 'Z' && st.state != 'X'
}

// Signal sends sig to the process if it is still the recorded one.
func (p Process) Signal(sig syscall.Signal) error {
	if !p.Alive() {
		return nil
	}
	return syscall.Kill(p.PID, sig)
}

// procStat is what svclab reads of /proc/PID/stat.
type procStat struct {
	state byte   // field 3: R, S, D, Z (zombie), X (dead), ...
	start uint64 // field 22: clock ticks since boot
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name may hold spaces and parentheses: fields start after the last ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return procStat{state: f[0][0], start: start}, nil
}

// Member returns the record of the member called name.
func (r *Lab) Member(name string) (Member, bool) {
	for _, m := range r.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func file(dir, id string) string { return filepath.Join(dir, id+".json") }

// RunDir is the lab's private directory for lock and state files.
func RunDir(dir, id string) string { return filepath.Join(dir, id) }

// Write records r in dir, atomically: through a temporary file named after
// the writing process (so that `clean` leaves it to a writer that still
// runs), removed if the write fails.
func Write(dir string, r *Lab) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("record lab %s: %w", r.ID, err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d%s", file(dir, r.ID), os.Getpid(), tmpSuffix)
	err = os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, file(dir, r.ID))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record lab %s: %w", r.ID, err)
	}
	return nil
}

// tmpSuffix ends a record being written: ID.json.PID.tmp.
const tmpSuffix = ".tmp"

// tmpOf tells whether name is a record being written, and whose (the lab's
// ID) by which process (0 when the name, of an older svclab, does not say).
func tmpOf(name string) (id string, writer int, ok bool) {
	rest, ok := strings.CutSuffix(name, tmpSuffix)
	if !ok {
		return "", 0, false
	}
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		if pid, err := strconv.Atoi(rest[i+1:]); err == nil {
			writer, rest = pid, rest[:i]
		}
	}
	return strings.TrimSuffix(rest, ".json"), writer, true
}

func Remove(dir, id string) error {
	err := os.Remove(file(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	// The log `svclab up` keeps for the lab's owner goes with the lab.
	logErr := os.Remove(filepath.Join(dir, id+".log"))
	if errors.Is(logErr, fs.ErrNotExist) {
		logErr = nil
	}
	return errors.Join(err, logErr, os.RemoveAll(RunDir(dir, id)))
}

// Corrupt is a record that cannot be read back: one bad file never hides the
// other labs; `svclab ls` warns about it and `svclab clean` removes it.
type Corrupt struct {
	Path string
	Err  error
}

func (c Corrupt) Error() string {
	return fmt.Sprintf("lab record %s is corrupt (%v): skipped; svclab clean removes it", c.Path, c.Err)
}

// Scan reads every record in dir, oldest first, and names apart those that
// cannot be read.
func Scan(dir string) ([]*Lab, []Corrupt, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	var recs []*Lab
	var bad []Corrupt
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing: its lab is gone
		}
		if err != nil {
			bad = append(bad, Corrupt{p, err})
			continue
		}
		var r Lab
		if err := json.Unmarshal(b, &r); err != nil {
			bad = append(bad, Corrupt{p, err})
			continue
		}
		if want := strings.TrimSuffix(filepath.Base(p), ".json"); r.ID != want {
			bad = append(bad, Corrupt{p, fmt.Errorf("it records lab %q, not %q", r.ID, want)})
			continue
		}
		recs = append(recs, &r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Created.Before(recs[j].Created) })
	return recs, bad, nil
}

// List lists the recorded labs, oldest first, leaving out corrupt records.
func List(dir string) ([]*Lab, error) {
	recs, _, err := Scan(dir)
	return recs, err
}

// Find returns the recorded lab called ref: a lab ID (web-k3f9), or a lab name when
// exactly one lab has it.
func Find(dir, ref string) (*Lab, error) {
	recs, err := List(dir)
	if err != nil {
		return nil, err
	}
	var byName []*Lab
	for _, r := range recs {
		if r.ID == ref {
			return r, nil
		}
		if r.Name == ref {
			byName = append(byName, r)
		}
	}
	// A name that a running lab and leftovers share means the running one.
	if len(byName) > 1 {
		var alive []*Lab
		for _, r := range byName {
			if r.Owner.Alive() {
				alive = append(alive, r)
			}
		}
		if len(alive) == 1 {
			return alive[0], nil
		}
	}
	switch len(byName) {
	case 0:
		return nil, fmt.Errorf("no lab %q is running (svclab ls lists them)", ref)
	case 1:
		return byName[0], nil
	}
	ids := make([]string, len(byName))
	for i, r := range byName {
		ids[i] = r.ID
	}
	return nil, fmt.Errorf("%d labs are called %q; name one of %s", len(byName), ref, strings.Join(ids, ", "))
}
