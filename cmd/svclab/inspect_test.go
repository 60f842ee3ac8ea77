package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/record"
)

// testRecord is a lab as its owner (this process) records it.
func testRecord() *record.Lab {
	return &record.Lab{ID: "web-abcd", Name: "web", RunID: "abcd", Source: "topologies/web.yaml", Mode: "iptables",
		Created: time.Now(), Owner: record.Self(),
		Members: []record.Member{
			{Name: "fabric", Kind: member.KindFabric, NetNS: "svclab-web-abcd-fabric"},
			{Name: "node-1", Kind: member.KindNode, NetNS: "svclab-web-abcd-node-1", IP: "192.168.1.10"},
			{Name: "web-1", Kind: member.KindPod, NetNS: "svclab-web-abcd-web-1", IP: "10.244.1.10", Node: "node-1"},
		},
		Components: []record.Component{{Name: "kube-apiserver", Process: record.Self()}},
		Services: []record.Service{{Name: "default/web:http", ClusterIP: "10.96.123.45", Port: 80, Protocol: "TCP", NodePort: 30080,
			Endpoints: []string{"10.244.1.10:8080", "10.244.2.10:8080 (not ready)"}}},
	}
}

// TestInspect: inspect prints a lab's members with their addresses, its
// Services and its components, from the record alone; --json is the record.
func TestInspect(t *testing.T) {
	var out bytes.Buffer
	printInspect(&out, stateOf(testRecord()))
	text := out.String()
	for _, want := range []string{"Lab web-abcd (web, from topologies/web.yaml): mode iptables by svclab's proxiers",
		"web-1   pod   10.244.1.10", "default/web:http  10.96.123.45  -            80/TCP  30080      10.244.1.10:8080, 10.244.2.10:8080 (not ready)",
		"kube-apiserver", "running", "svclab down web-abcd"} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "fabric") {
		t.Errorf("inspect shows the fabric:\n%s", text)
	}
	// A component's death shows as the lab's health, as in ls.
	dead := testRecord()
	dead.Deaths = []record.Death{{Component: "kube-apiserver on control-plane", PID: 7, Status: "137 (killed)", At: time.Now()}}
	out.Reset()
	printInspect(&out, stateOf(dead))
	if want := "degraded: kube-apiserver on control-plane exited 137 (killed)"; !strings.Contains(out.String(), want) {
		t.Errorf("inspect of a lab whose API server died lacks %q:\n%s", want, out.String())
	}
	b, err := json.Marshal(stateOf(testRecord()))
	if err != nil {
		t.Fatal(err)
	}
	var back labState
	if err := json.Unmarshal(b, &back); err != nil || !back.Running || back.ID != "web-abcd" || len(back.Services) != 1 || len(back.Members) != 3 {
		t.Errorf("inspect --json: %v\n%s", err, b)
	}
}

// TestCompletion: the shells complete lab and member names from the records,
// modes, shipped topologies and the flags' fixed values.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	if err := record.Write(dir, testRecord()); err != nil {
		t.Fatal(err)
	}
	if got := labNames(dir); !slices.Equal(got, []string{"web", "web-abcd"}) {
		t.Errorf("lab names %v", got)
	}
	if got := memberNames(dir, "web"); !slices.Equal(got, []string{"node-1", "web-1"}) {
		t.Errorf("members %v", got)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "verify", "--mode", ""}, []string{"iptables", "ipvs", "nftables", "all"}},
		{[]string{"__complete", "up", "--mode", ""}, []string{"iptables", "ipvs", "nftables"}},
		{[]string{"__complete", "up", "-f", ""}, []string{"web", "httpd", "lb"}},
		{[]string{"__complete", "verify", "--scheduler", ""}, []string{"rr", "mh"}},
		{[]string{"__complete", "rules", "--backend", ""}, []string{"nft", "legacy"}},
		{[]string{"__complete", "ins"}, []string{"inspect"}},
	} {
		out, err := rootCmd(c.args...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		got := strings.Split(out, "\n")
		for _, w := range c.want {
			if !slices.ContainsFunc(got, func(l string) bool { return l == w || strings.HasPrefix(l, w+"\t") }) {
				t.Errorf("%v: no %q in\n%s", c.args, w, out)
			}
		}
		if c.args[1] == "up" && c.args[2] == "--mode" && slices.Contains(got, "all") {
			t.Errorf("up completes --mode all, which only verify takes")
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out, err := rootCmd("completion", shell); err != nil || !strings.Contains(out, "svclab") {
			t.Errorf("completion %s: %v", shell, err)
		}
	}
}
