package meminfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSum(t *testing.T) {
	file := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(file, []byte("MemTotal:       24683508 kB\nSUnreclaim:       100 kB\nVmallocUsed:       20 kB\nPercpu:        3 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := sum(file, "SUnreclaim", "VmallocUsed", "Percpu")
	if err != nil || got != 123*1024 {
		t.Fatalf("sum = %d, %v; want %d", got, err, 123*1024)
	}
	if _, err := sum(file, "SUnreclaim", "Missing"); err == nil || !strings.Contains(err.Error(), "found 1 of SUnreclaim, Missing") {
		t.Fatalf("a missing key: err = %v", err)
	}
}

func TestThisMachine(t *testing.T) {
	if k, err := Kernel(); err != nil || k <= 0 {
		t.Fatalf("Kernel() = %d, %v", k, err)
	}
	if r, err := ProcessRSS(); err != nil || r <= 0 {
		t.Fatalf("ProcessRSS() = %d, %v", r, err)
	}
}
