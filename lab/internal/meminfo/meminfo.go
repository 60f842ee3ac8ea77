// Package meminfo reads what memory the kernel and this process hold, for the
// benchmarks' memory figures.
package meminfo

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Kernel is the kernel's unreclaimable memory as /proc/meminfo reports it:
// unreclaimable slab (network namespaces and devices, nf_tables rules and
// chains, IPVS services and real servers, ipset entries: kmalloc), vmalloc
// (x_tables' table blob, nf_tables' rule arrays of large chains: kvmalloc) and
// per-CPU memory (x_tables' rule counters, each namespace's per-CPU
// statistics). It is machine-wide: the difference across a step is the step's
// cost plus whatever else the machine did meanwhile, which in the VM is nothing
// and on a shared host is noise of a few MB.
func Kernel() (int64, error) {
	return sum("/proc/meminfo", "SUnreclaim", "VmallocUsed", "Percpu")
}

// ProcessRSS is this process's resident memory now (VmRSS).
func ProcessRSS() (int64, error) {
	return sum("/proc/self/status", "VmRSS")
}

// sum adds the kB figures of keys in a file of "Key: N kB" lines, in bytes.
func sum(file string, keys ...string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
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
			return 0, fmt.Errorf("%s %s: %w", file, key, err)
		}
		total += kb * 1024
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if found != len(want) {
		return 0, fmt.Errorf("%s: found %d of %s", file, found, strings.Join(keys, ", "))
	}
	return total, nil
}
