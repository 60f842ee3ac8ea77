package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors: every mistake in how svclab is called exits 2 and says what is
// wrong, where to read the usage and, for a mistyped name, the name meant. A plan
// refuses what a run refuses. None of these builds anything: each fails before.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	npa := filepath.Join(dir, "npa.yaml")
	if err := os.WriteFile(npa, []byte("nodePortAddresses: [\"192.168.0.0/16\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctMax := filepath.Join(dir, "ctmax.yaml")
	if err := os.WriteFile(ctMax, []byte("conntrack:\n  maxPerCore: 32768\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodeCIDR := filepath.Join(dir, "nodecidr.yaml")
	if err := os.WriteFile(nodeCIDR, []byte("detectLocalMode: NodeCIDR\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"verify", "--bogus"}, []string{"unknown flag: --bogus", "see 'svclab verify --help'"}},
		{[]string{"verify", "--mdoe", "ipvs"}, []string{"did you mean --mode?"}},
		{[]string{"verify", "extra"}, []string{"see 'svclab verify --help'"}},
		{[]string{"vrify"}, []string{`did you mean "verify"?`, "see 'svclab --help'"}},
		{[]string{"down"}, []string{"see 'svclab down --help'"}},
		{[]string{"exec", "lab"}, []string{"see 'svclab exec --help'"}},
		{[]string{"verify", "--plan", "-f", dir}, []string{dir, "is a directory"}},
		{[]string{"verify", "--plan", "-f", "no-such-topology"}, []string{"no shipped topology has that name"}},
		{[]string{"verify", "--mode", "nftables"}, []string{"no proxier of its own"}},
		{[]string{"verify", "--plan", "--mode", "nftables"}, []string{"no proxier of its own"}},
		{[]string{"verify", "--plan", "--backend", "nftt"}, []string{`backend "nftt"`}},
		{[]string{"verify", "--plan", "--proxy", "kube-proxy", "--backend", "nftt"}, []string{`backend "nftt"`}},
		{[]string{"verify", "--plan", "--mode", "ipvs", "--scheduler", "foo"}, []string{`ipvs.scheduler "foo"`}},
		{[]string{"verify", "--plan", "--kube-proxy-config", npa}, []string{"nodePortAddresses"}},
		{[]string{"verify", "--plan", "--kube-proxy-config", ctMax}, []string{"conntrack.maxPerCore", "nf_conntrack_max on the host"}},
		{[]string{"verify", "--plan", "--proxy", "kube-proxy", "--kube-proxy-config", ctMax}, []string{ctMax + ":2: conntrack.maxPerCore", "hashsize"}},
		{[]string{"verify", "--plan", "--mode", "ipvs", "--kube-proxy-config", nodeCIDR}, []string{"detectLocalMode NodeCIDR", "in ipvs mode"}},
		{[]string{"graph", "web", "-f", "web"}, []string{"not both"}},
		{[]string{"graph", "--format", "png"}, []string{`--format "png"`}},
		{[]string{"up", "--backend", "nftt"}, []string{`backend "nftt"`, "see 'svclab up --help'"}},
	} {
		var stderr bytes.Buffer
		code := runSvclab(c.args, &stderr)
		if code != exitUsage {
			t.Errorf("svclab %s: exit %d, want %d; stderr:\n%s", strings.Join(c.args, " "), code, exitUsage, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("svclab %s: stderr lacks %q:\n%s", strings.Join(c.args, " "), w, stderr.String())
			}
		}
	}
}

// TestPlanJSONHasNoVerdict: a plan observed nothing, so its JSON says neither
// "passed": true nor false.
func TestPlanJSONHasNoVerdict(t *testing.T) {
	out, err := verifyCmd("--plan", "--json", "-f", "web")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, `"passed"`) || !strings.Contains(out, `"planned": true`) {
		t.Errorf("plan:\n%.400s", out)
	}
}

// TestRunJSONVerdictOnLineTwo: a run's report keeps its verdict on its second
// line, where scripts/test.sh reads it.
func TestRunJSONVerdictOnLineTwo(t *testing.T) {
	var b bytes.Buffer
	if err := printReport(&b, verifyReport{Passed: true}, true); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(b.String(), "\n"); len(lines) < 2 || lines[1] != `  "passed": true,` {
		t.Errorf("run report:\n%s", b.String())
	}
}
