package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/svclab/svclab/lab/namespaces"
)

// kernelMemory is the kernel's unreclaimable memory as /proc/meminfo reports it:
// unreclaimable slab (nf_tables rules and chains, IPVS services and real
// servers, ipset entries: kmalloc), vmalloc (x_tables' table blob, nf_tables'
// rule arrays of large chains: kvmalloc) and per-CPU memory (x_tables' rule
// counters). It is machine-wide: the difference across a sync is the ruleset's
// cost plus whatever else the machine did meanwhile, which in the VM is nothing
// and on a shared host is noise of a few MB.
func kernelMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	want := map[string]bool{"SUnreclaim": true, "VmallocUsed": true, "Percpu": true}
	var total int64
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || !want[key] {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 1 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo %s: %w", key, err)
		}
		total += kb * 1024
		found++
	}
	if found != len(want) {
		return 0, fmt.Errorf("/proc/meminfo: found %d of SUnreclaim, VmallocUsed, Percpu", found)
	}
	return total, sc.Err()
}

// ipvsCounts counts the virtual servers and real servers in /proc/net/ip_vs of
// the node's namespace (IPVS tables are per namespace); ok is false when the
// kernel has no IPVS. The file is read through /proc/thread-self: /proc/net is
// /proc/self/net, which shows the namespace of the process's main thread, not
// of the thread switched into the node's.
func ipvsCounts(ns string) (services, reals int, ok bool, err error) {
	var data []byte
	err = namespaces.Do(ns, func() error {
		var rerr error
		data, rerr = os.ReadFile("/proc/thread-self/net/ip_vs")
		return rerr
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	for _, l := range bytes.Split(data, []byte("\n")) {
		switch {
		case bytes.HasPrefix(l, []byte("TCP ")), bytes.HasPrefix(l, []byte("UDP ")), bytes.HasPrefix(l, []byte("SCTP ")), bytes.HasPrefix(l, []byte("FWM ")):
			services++
		case bytes.HasPrefix(bytes.TrimSpace(l), []byte("-> ")) && !bytes.Contains(l, []byte("RemoteAddress")):
			reals++
		}
	}
	return services, reals, true, nil
}
