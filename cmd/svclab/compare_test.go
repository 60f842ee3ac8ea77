package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/compare"
	"github.com/svclab/svclab/lab/topology"
)

const seed002 = "../../lab/importer/testdata/seed002/"

// TestCompareSeed002: seed 002's cluster, imported from what kubectl printed,
// against the rules the seed printed from node master: kube-proxy 1.18 would
// have written every Service rule the seed shows, and compare names only what
// the seed's listing leaves out: the comments of the one endpoint chain it
// prints, the chains of the two endpoints it summarises as "the others are
// alike", the kubernetes Service's rules (kept by import, at the API server on
// master), and kube-proxy's chains that are no Service's.
func TestCompareSeed002(t *testing.T) {
	lab := filepath.Join(t.TempDir(), "seed002.yaml")
	imp := newImportCommand()
	imp.SetArgs([]string{seed002 + "cluster.yaml", seed002 + "kube-proxy.yaml", "-o", lab})
	imp.SetErr(&bytes.Buffer{})
	if err := imp.Execute(); err != nil {
		t.Fatal(err)
	}
	cmd := newCompareCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"-f", lab, "--node", "master", "--kube-proxy-version", "1.18", seed002 + "master.iptables-save"})
	err := cmd.Execute()
	var code exitCode
	if !errors.As(err, &code) || code != exitFailed {
		t.Fatalf("compare: %v, want exit %d\n%s", err, exitFailed, out.String())
	}
	var subjects []string
	for _, l := range strings.Split(out.String(), "\n")[1:] {
		if l != "" && !strings.HasPrefix(l, " ") {
			name, verdict, _ := strings.Cut(l, ": ")
			verdict, _, _ = strings.Cut(verdict, ":")
			subjects = append(subjects, name+" "+verdict)
		}
	}
	want := []string{
		"Service default/kubernetes:https missing",
		"endpoint 10.244.1.27:80 of Service default/service-httpd differs",
		"endpoint 10.244.1.28:80 of Service default/service-httpd missing",
		"endpoint 10.244.2.21:80 of Service default/service-httpd missing",
		"endpoint 172.16.213.221:6443 of Service default/kubernetes:https missing",
	}
	for _, c := range []string{"FORWARD", "INPUT", "KUBE-EXTERNAL-SERVICES", "KUBE-FIREWALL", "KUBE-FORWARD", "KUBE-MARK-DROP", "KUBE-MARK-MASQ",
		"KUBE-POSTROUTING", "KUBE-PROXY-CANARY", "KUBE-SERVICES", "OUTPUT", "POSTROUTING", "PREROUTING"} {
		want = append(want, "kube-proxy's chain "+c+" missing")
	}
	if strings.Join(subjects, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences:\n%s\nwant:\n%s\nreport:\n%s", strings.Join(subjects, "\n"), strings.Join(want, "\n"), out.String())
	}
	// The seed's one endpoint chain differs by its comments only.
	if !strings.Contains(out.String(), `+ nat -A KUBE-SEP-KIILMGZB3LCHX6UB -s 10.244.1.27/32 -j KUBE-MARK-MASQ`) {
		t.Errorf("the seed's uncommented endpoint rule is not reported:\n%s", out.String())
	}
	// The KUBE-SERVICES difference is the jump to KUBE-NODEPORTS the listing
	// leaves out, none of the Service's own rules.
	if strings.Contains(out.String(), "10.101.20.80") || strings.Contains(out.String(), "30271") {
		t.Errorf("a rule of the Service the seed lists is reported:\n%s", out.String())
	}

	// --json says the same, with the same exit code.
	cmd = newCompareCommand()
	var js bytes.Buffer
	cmd.SetOut(&js)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"-f", lab, "--node", "master", "--kube-proxy-version", "1.18", "--json", seed002 + "master.iptables-save"})
	if err := cmd.Execute(); !errors.As(err, &code) || code != exitFailed {
		t.Fatalf("compare --json: %v, want exit %d", err, exitFailed)
	}
	var rep compareReport
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatalf("compare --json printed no JSON: %v\n%s", err, js.String())
	}
	var jsonSubjects []string
	for _, d := range rep.Differences {
		verdict, _, _ := strings.Cut(d.Verdict, ":")
		jsonSubjects = append(jsonSubjects, d.Name+" "+verdict)
	}
	if rep.Equal || rep.Node != "master" || rep.KubeProxyVersion != "1.18" || strings.Join(jsonSubjects, "\n") != strings.Join(want, "\n") {
		t.Errorf("compare --json: %+v", rep)
	}

	// Negative control: with the Service's current nodePort changed, its
	// rules differ.
	cmd = newCompareCommand()
	out.Reset()
	cmd.SetOut(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"-f", "../../topologies/httpd.yaml", "--node", "master", "--kube-proxy-version", "1.18", seed002 + "master.iptables-save"})
	if err := cmd.Execute(); !errors.As(err, &code) || !strings.Contains(out.String(), "Service default/service-httpd: differs") {
		t.Errorf("httpd.yaml (nodePort 32000) against the seed's 30271: %v\n%s", err, out.String())
	}
}

// TestImportCompareBadInput: bad input is a usage error (exit 2) naming the
// file and the field, or the flag.
func TestImportCompareBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {podCIDRs: [nope]}\nstatus: {addresses: [{type: InternalIP, address: 10.0.0.1}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  func() *cobra.Command
		args []string
		want string
	}{
		{newImportCommand, []string{bad}, bad + " (Node n1): spec.podCIDRs: \"nope\" is no CIDR"},
		{newImportCommand, []string{seed002 + "cluster.yaml", "--client", "laptop"}, `--client "laptop": want NAME=IP`},
		{newImportCommand, []string{seed002 + "cluster.yaml", "-l", "a in (b"}, `-l "a in (b"`},
		{newCompareCommand, []string{"-f", "httpd", seed002 + "master.iptables-save"}, "--node: required"},
		{newCompareCommand, []string{"-f", "httpd", "--node", "nobody", seed002 + "master.iptables-save"}, `no node "nobody"`},
		{newCompareCommand, []string{"-f", "httpd", "--node", "master", "--mode", "nftables", seed002 + "master.iptables-save"}, "nftables"},
		{newCompareCommand, []string{"-f", "httpd", "--node", "master", "/nonexistent"}, "/nonexistent"},
		{newCompareCommand, []string{"-f", "httpd", "--node", "master", seed002 + "cluster.yaml"}, seed002 + "cluster.yaml: not a dump: no iptables-save table"},
		{newCompareCommand, []string{"-f", "httpd", "--node", "master", "--mode", "ipvs", seed002 + "cluster.yaml"}, seed002 + "cluster.yaml: not a dump: no `ipvsadm -Ln`"},
		{newCompareCommand, []string{"-f", "httpd", "--node", "master", empty}, empty + ": not a dump: no iptables-save table in it (no line like \"*nat\"; it is empty)"},
	} {
		cmd := tc.cmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want a usage error (exit 2) containing %q", cmd.Name(), tc.args, err, tc.want)
		}
	}
}

// TestCompareTakesTheClustersNodeName: a node import renamed (a dotted EKS
// name is no DNS label) is found by `compare --node` under the cluster's name,
// which the note of import and compare's stderr both tie to the lab's.
func TestCompareTakesTheClustersNodeName(t *testing.T) {
	topo, err := topology.Load("../../topologies/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const real, inLab = "ip-192-168-1-10.EC2.internal", "ip-192-168-1-10-ec2-internal"
	dir := t.TempDir()
	dump := filepath.Join(dir, "cluster.json")
	if err := os.WriteFile(dump, bytes.ReplaceAll(kubectlDump(t, topo), []byte(`"node-1"`), []byte(`"`+real+`"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	labFile := filepath.Join(dir, "lab.yaml")
	var stderr bytes.Buffer
	if code := runSvclab([]string{"import", dump, "-o", labFile}, &stderr); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr.String())
	}
	imported, err := topology.Load(labFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := renderNode(imported, lab.Options{Mode: "iptables"}, inLab)
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "node.iptables-save")
	if err := os.WriteFile(saved, []byte(compare.AsSaved(rules)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newCompareCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"-f", labFile, "--node", real, saved})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("compare --node %s: %v\n%s%s", real, err, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "node "+real+" is "+inLab) || !strings.Contains(out.String(), "node "+inLab+" holds what kube-proxy") {
		t.Errorf("compare --node %s: stdout %q, stderr %q", real, out.String(), errOut.String())
	}
	// A name that is no node's, in either form, is still refused.
	cmd = newCompareCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"-f", labFile, "--node", "ip-10-9-9-9.ec2.internal", saved})
	var ue usageError
	if err := cmd.Execute(); !errors.As(err, &ue) {
		t.Errorf("compare --node of no node: %v, want a usage error", err)
	}
}
