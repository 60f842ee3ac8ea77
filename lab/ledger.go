package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/record"
)

// ledger is the part of a lab that knows what it is made of: its members by
// name and the record that lists them (with its components, deaths and
// Services), written anew on every change so that `down` and `clean` can
// remove a lab whose owner died. Its lock is its own and guards nothing else;
// it is taken inside changeMu and Lab.mu, never around them, and nothing is
// called with it held but record.Write and the encoding of the record. The
// owner answers for the lab on a socket (record.Serve) with the record it
// holds, which `svclab ls` asks: a record that cannot be written (the run
// directory full) leaves the file on disk behind the lab, and the answer says
// so (stale).
type ledger struct {
	// lab and run name the members' namespaces; dir is where the record is.
	lab, run, dir string

	mu      sync.Mutex
	members map[string]*member.Member
	rec     *record.Lab
	// closed is set when the lab goes down: the record is removed then, and
	// must not be written again.
	closed bool
	// stale is set while the record on disk is behind rec: a write failed.
	// retry writes it again after retryEvery, until a write succeeds, so
	// that the file catches up once there is room (`down` and `clean` read
	// it after the owner is gone).
	stale *record.Stale
	retry *time.Timer
	// server answers for the lab, from serve until close.
	server *record.Server
}

// retryEvery is how often a record that could not be written is tried again.
const retryEvery = 5 * time.Second

// Add puts a member called name into the ledger and writes the record.
func (g *ledger) Add(name, kind string, ip netip.Addr, node string) (*member.Member, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.addLocked(name, kind, ip, node)
	g.rec.Members = g.recordsLocked()
	return m, g.writeLocked()
}

// addLocked adds a member without touching the record, for newLab, which
// lists them all in it at once.
func (g *ledger) addLocked(name, kind string, ip netip.Addr, node string) *member.Member {
	m := &member.Member{Name: name, Kind: kind, NetNS: namespaceName(g.lab, name, g.run), IP: ip, Node: node}
	if g.members == nil {
		g.members = map[string]*member.Member{}
	}
	g.members[name] = m
	return m
}

// Remove takes the member called name out of the ledger and writes the
// record.
func (g *ledger) Remove(name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.members, name)
	g.rec.Members = g.recordsLocked()
	return g.writeLocked()
}

// update changes the record with change and writes it; once the lab is down
// it does neither.
func (g *ledger) Update(change func(r *record.Lab)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	change(g.rec)
	return g.writeLocked()
}

// write writes the record as it stands.
func (g *ledger) write() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writeLocked()
}

func (g *ledger) writeLocked() error {
	if g.closed {
		return nil
	}
	err := record.Write(g.dir, g.rec)
	if err == nil {
		g.stale = nil
		return nil
	}
	// Stale since the first write that failed, for the latest cause.
	since := time.Now()
	if g.stale != nil {
		since = g.stale.Since
	}
	g.stale = record.NewStale(since, err)
	if g.retry == nil {
		g.retry = time.AfterFunc(retryEvery, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.retry = nil
			g.writeLocked()
		})
	}
	return err
}

// serve answers for the lab on its owner's socket until close; the lab's run
// directory must exist. Bound while there is room, the socket goes on
// answering when the run directory fills up.
func (g *ledger) serve() error {
	s, err := record.Serve(g.dir, g.rec.ID, g.live)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		s.Close()
		return nil
	}
	g.server = s
	return nil
}

// live is the record as the owner holds it, saying when the file on disk is
// behind it.
func (g *ledger) live() ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := *g.rec
	r.Stale = g.stale
	return json.Marshal(&r)
}

// close stops the writes of the record, whose lab goes down, and the answers
// for it; it returns the namespaces of the members.
func (g *ledger) close() []string {
	g.mu.Lock()
	g.closed = true
	if g.retry != nil {
		g.retry.Stop()
		g.retry = nil
	}
	server := g.server
	g.server = nil
	names := make([]string, 0, len(g.members))
	for _, m := range g.members {
		names = append(names, m.NetNS)
	}
	g.mu.Unlock()
	// Outside the lock: an answer being written takes it.
	if server != nil {
		server.Close()
	}
	return names
}

// record is a copy of the record as it stands.
func (g *ledger) record() record.Lab {
	g.mu.Lock()
	defer g.mu.Unlock()
	return *g.rec
}

// netns is the namespace of the member called name; empty when there is none.
func (g *ledger) netns(name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.members[name]; m != nil {
		return m.NetNS
	}
	return ""
}

// Member is a copy of the member called name.
func (g *ledger) Member(name string) (*member.Member, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[name]
	if !ok {
		return nil, fmt.Errorf("lab %s has no member %q", g.rec.ID, name)
	}
	c := *m
	return &c, nil
}

// Members lists every member the way `svclab up` prints them.
func (g *ledger) Members() []record.Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.recordsLocked()
}

func (g *ledger) recordsLocked() []record.Member {
	recs := make([]record.Member, 0, len(g.members))
	for _, m := range g.members {
		r := record.Member{Name: m.Name, Kind: m.Kind, NetNS: m.NetNS, Node: m.Node}
		if m.IP.IsValid() {
			r.IP = m.IP.String()
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Kind != recs[j].Kind {
			return kindOrder[recs[i].Kind] < kindOrder[recs[j].Kind]
		}
		return recs[i].Name < recs[j].Name
	})
	return recs
}

// kindOrder lists members the way `svclab up` prints them.
var kindOrder = map[string]int{member.KindFabric: 0, member.KindControlPlane: 1, member.KindLoadBalancer: 2, member.KindNode: 3, member.KindClient: 4, member.KindPod: 5}
