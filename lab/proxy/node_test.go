package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrepare(t *testing.T) {
	if err := Prepare("ipvs", Target{}); err == nil || !strings.Contains(err.Error(), "ipvs proxier: no node network namespace") {
		t.Errorf("no namespace: %v", err)
	}
	missing := errors.New("the kernel lacks ip_vs")
	ran := false
	err := Prepare("ipvs", Target{NetNS: "/run/netns/x"}, func() error { return missing }, func() error { ran = true; return nil })
	if !errors.Is(err, missing) || ran {
		t.Errorf("failing check: %v, later check ran: %v", err, ran)
	}
	dir := filepath.Join(t.TempDir(), "run", "node-1")
	if err := Prepare("iptables", Target{NetNS: "/run/netns/x", RunDir: dir}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("run directory: %v", err)
	}
}
