package ipvs

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A real server whose endpoint went away may still carry connections. kube-proxy
// (pkg/proxy/ipvs/graceful_termination.go) then does not delete it: it sets its
// weight to 0, so the scheduler sends it nothing new while IPVS keeps forwarding
// the connections it has, and a goroutine retries the deletion every minute until
// the real server has no active and no inactive connections left. Closed TCP
// connections count as inactive while IPVS keeps them in TIME_WAIT and its other
// closing states (up to two minutes). UDP and SCTP real servers are deleted at
// once: with expire_nodest_conn=1 IPVS drops their flows' next packet and
// schedules anew. An endpoint that comes back while draining is deleted and added
// again with weight 1.

// draining is one real server set to weight 0, waiting for its connections to end.
type draining struct {
	vs VirtualServer
	rs RealServer
}

func (d draining) key() string { return d.vs.Key() + "/" + d.rs.String() }

// drainList is the set of draining real servers. Its owner serialises access.
type drainList map[string]draining

// gracefulNeeded tells whether a protocol's real servers drain before deletion.
func gracefulNeeded(p corev1.Protocol) bool {
	return p != corev1.ProtocolUDP && p != corev1.ProtocolSCTP
}

// gracefulDelete removes r from v, or sets it to weight 0 and adds it to the list
// when it still has connections (GracefulDeleteRS). It reports whether r went at
// once.
func (p *Proxier) gracefulDelete(v *VirtualServer, r RealServer) (bool, error) {
	d := draining{vs: *v, rs: r}
	gone, err := p.tryDelete(d)
	if err != nil || gone {
		return gone, err
	}
	r.Weight = 0
	if err := p.k.updateDest(v, r); err != nil {
		return false, err
	}
	p.draining[d.key()] = d
	return false, nil
}

// tryDelete deletes a draining real server once it has no connections
// (deleteRsFunc); a real server that is no longer there counts as deleted.
func (p *Proxier) tryDelete(d draining) (bool, error) {
	ds, err := p.k.dests(&d.vs)
	if err != nil {
		return false, err
	}
	for _, cur := range ds {
		if cur.Addr != d.rs.Addr || cur.Port != d.rs.Port {
			continue
		}
		if gracefulNeeded(d.vs.Protocol) && cur.active+cur.inactive != 0 {
			return false, nil
		}
		return true, p.k.deleteDest(&d.vs, d.rs)
	}
	return true, nil
}

// drainOnce tries every draining real server once (tryDeleteRs).
func (p *Proxier) drainOnce() error {
	keys := make([]string, 0, len(p.draining))
	for k := range p.draining {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []string
	for _, k := range keys {
		gone, err := p.tryDelete(p.draining[k])
		if err != nil {
			errs = append(errs, err.Error())
		}
		if gone {
			delete(p.draining, k)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("graceful termination: %s", strings.Join(errs, "; "))
	}
	return nil
}
