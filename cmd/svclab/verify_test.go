package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/topology"
)

func verifyCmd(args ...string) (string, error) {
	cmd := newVerifyCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestVerifyPlan: --plan prints every check of every run, in the report's own
// shape, marked planned, and builds nothing (no lab, no VM: ipvs is planned too).
func TestVerifyPlan(t *testing.T) {
	out, err := verifyCmd("--plan", "--json", "--mode", "all", "-f", "../../topologies/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	modes := map[string]int{}
	for _, c := range rep.Checks {
		modes[c.Mode]++
		if c.Observed != "" || c.Passed || c.Expected == "" {
			t.Errorf("planned check %+v", c)
		}
	}
	if !rep.Planned || rep.Passed || len(rep.Checks) != 3*18 || modes["iptables-nft"] != 18 || modes["iptables-legacy"] != 18 || modes["ipvs"] != 18 {
		t.Errorf("planned %t, passed %t, checks per mode %v; want 18 planned for each of iptables-nft, iptables-legacy and ipvs", rep.Planned, rep.Passed, modes)
	}
	table, err := verifyCmd("--plan", "-f", "../../topologies/web.yaml", "--flows", "../../topologies/flows/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 1+6 || !strings.HasPrefix(lines[0], "RESULT") {
		t.Fatalf("want a header and 6 flows:\n%s", table)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "PLAN  ") {
			t.Errorf("not planned: %s", l)
		}
	}
	// The shipped flows file by name, as -f takes a shipped topology.
	byName, err := verifyCmd("--plan", "-f", "web", "--flows", "web")
	if err != nil || byName != table {
		t.Errorf("--flows web: %v\n%s\nwant\n%s", err, byName, table)
	}
	if _, err := verifyCmd("--plan", "--flows", "nope"); err == nil || !strings.Contains(err.Error(), "no shipped flows file has that name (shipped: web)") {
		t.Errorf("--flows nope: %v", err)
	}
}

// A bad flows file is bad input: main exits 2 on a topology.ErrorList.
func TestVerifyBadFlows(t *testing.T) {
	_, err := verifyCmd("--plan", "-f", "../../topologies/web.yaml", "--flows", "../../lab/verify/testdata/bad.flows.yaml")
	var list topology.ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("want the file's mistakes, got %v", err)
	}
	var ue usageError
	if !errors.As(err, &ue) {
		t.Errorf("%v: not a usage error", err)
	}
}

// TestVerifyRunsLogProgress: every lab verify builds reports its long steps (the
// component build's heartbeat among them) on stderr; verify once built its labs
// without a logger, and a first build of the components printed nothing for 15
// minutes.
func TestVerifyRunsLogProgress(t *testing.T) {
	topo, err := loadTopology("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, proxyImpl := range []string{proxySvclab, proxyKubeProxy} {
		f := labFlags{mode: "all", proxyImpl: proxyImpl}
		runs, err := verifyRuns(f, topo, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.opts.Log != os.Stderr {
				t.Errorf("--proxy %s: run %s builds its lab with log %v, not stderr", proxyImpl, r.label, r.opts.Log)
			}
		}
		if len(runs) == 0 {
			t.Errorf("--proxy %s --mode all: no runs", proxyImpl)
		}
	}
}
