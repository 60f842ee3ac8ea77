package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
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
