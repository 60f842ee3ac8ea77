package ipvs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/svclab/svclab/lab/proxy"
)

// KernelCounts counts the virtual servers and real servers in /proc/net/ip_vs
// of the node's namespace (IPVS tables are per namespace): the kernel's own
// account, named as the proxier's SyncStats counts them. The file is read
// through /proc/thread-self: /proc/net is /proc/self/net, which shows the
// namespace of the process's main thread, not of the thread switched into the
// node's.
func (p *Proxier) KernelCounts(ctx context.Context) ([]proxy.Count, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.node == nil {
		return nil, errors.New("ipvs proxier: closed")
	}
	var data []byte
	err := p.node.Do(func() error {
		var err error
		data, err = os.ReadFile("/proc/thread-self/net/ip_vs")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count virtual servers in the kernel: %w", err)
	}
	services, reals := 0, 0
	for _, l := range bytes.Split(data, []byte("\n")) {
		switch {
		case bytes.HasPrefix(l, []byte("TCP ")), bytes.HasPrefix(l, []byte("UDP ")), bytes.HasPrefix(l, []byte("SCTP ")), bytes.HasPrefix(l, []byte("FWM ")):
			services++
		case bytes.HasPrefix(bytes.TrimSpace(l), []byte("-> ")) && !bytes.Contains(l, []byte("RemoteAddress")):
			reals++
		}
	}
	return []proxy.Count{{Name: "virtual_servers", N: services}, {Name: "real_servers", N: reals}}, nil
}
