package doctor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// threadNamespaces returns the network namespace of every thread of this
// process: a probe that left a thread inside its namespace would keep it alive.
func threadNamespaces(t *testing.T) map[string]string {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range tasks {
		if ns, err := os.Readlink(p); err == nil { // a thread may end meanwhile
			out[p] = ns
		}
	}
	return out
}

func rootLinks(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

// TestProbeKernel probes this kernel for real, as root, and checks that the
// probe's namespace is gone afterwards, that no thread stayed in it, that the
// root namespace's links did not change, and that the answers are consistent:
// every feature present or missing unless a prerequisite is missing, and IPVS
// present exactly when the kernel shows /proc/net/ip_vs.
func TestProbeKernel(t *testing.T) {
	if err := namespaces.CheckPrivileges(); err != nil {
		t.Fatalf("this test creates a network namespace and must run as root: %v", err)
	}
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	linksBefore := rootLinks(t)

	features, ns, err := probeKernel(context.Background(), true)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if !strings.HasPrefix(ns, record.NamespacePrefix+"doctor-") {
		t.Fatalf("probe namespace %q, want %sdoctor-...", ns, record.NamespacePrefix)
	}
	if namespaces.Exists(ns) {
		t.Errorf("the probe left its namespace %s behind", ns)
		namespaces.Delete(ns)
	}
	left, err := namespaces.List(record.NamespacePrefix + "doctor-")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(left, ns) {
		t.Errorf("%s still listed in %s", ns, namespaces.Dir)
	}
	for task, tns := range threadNamespaces(t) {
		if tns != self {
			t.Errorf("thread %s is in %s, not in the process's own %s", task, tns, self)
		}
	}
	if after := rootLinks(t); !slices.Equal(after, linksBefore) {
		t.Errorf("the root namespace's links changed: %v, then %v", linksBefore, after)
	}

	byName := map[string]Feature{}
	for _, f := range features {
		byName[f.Name] = f
		t.Logf("%-22s %-8s %s", f.Name, f.State, f.Detail)
	}
	if len(byName) != len(featureDefs) {
		t.Errorf("%d features answered, doctor knows %d", len(byName), len(featureDefs))
	}
	if byName["netns"].State != Present {
		t.Errorf("netns %s although the probe made a namespace", byName["netns"].State)
	}
	// Only a missing prerequisite excuses a feature from being probed as root.
	noBackend := byName["nf_tables"].State != Present && byName["ip_tables"].State != Present
	for _, d := range featureDefs {
		f := byName[d.name]
		if f.State == Missing && f.Detail == "" {
			t.Errorf("%s missing without the kernel's answer", f.Name)
		}
		excused := (d.name == "br_netfilter" && byName["bridge"].State != Present) ||
			(d.name == "xt_set" && byName["ip_set"].State != Present) ||
			(len(d.rules) > 0 && noBackend)
		if f.State == Unknown && !excused {
			t.Errorf("%s not probed as root: %s", f.Name, f.Detail)
		}
	}
	_, statErr := os.Stat("/proc/net/ip_vs")
	if hasIPVS := statErr == nil; hasIPVS != (byName["ip_vs"].State == Present) {
		t.Errorf("ip_vs %s, but /proc/net/ip_vs exists: %v", byName["ip_vs"].State, hasIPVS)
	}
}

// TestRunJudgesEveryMode runs the whole doctor as root: every registered mode
// gets a verdict, and the report's OK matches them.
func TestRunJudgesEveryMode(t *testing.T) {
	if err := namespaces.CheckPrivileges(); err != nil {
		t.Fatalf("this test creates a network namespace and must run as root: %v", err)
	}
	rep, err := Run(context.Background(), Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != len(registeredModes()) {
		t.Errorf("%d verdicts for %d modes", len(rep.Modes), len(registeredModes()))
	}
	ok := true
	for _, v := range rep.Modes {
		t.Logf("%s: %s", v.Mode, v)
		ok = ok && v.Where != Nowhere
		if v.Where == Native && v.Why != "" {
			t.Errorf("%s native but unverified as root: %s", v.Mode, v.Why)
		}
	}
	if rep.OK != ok {
		t.Errorf("report OK %v, verdicts say %v", rep.OK, ok)
	}
	if rep.VMKernel.Cached {
		t.Errorf("an empty cache directory holds a kernel: %+v", rep.VMKernel)
	}
}

// TestProbeRemovesItsNamespaceOnError: a probe cut short (Ctrl-C cancels its
// context) still removes its namespace.
func TestProbeRemovesItsNamespaceOnError(t *testing.T) {
	if err := namespaces.CheckPrivileges(); err != nil {
		t.Fatalf("this test creates a network namespace and must run as root: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, ns, err := probeKernel(ctx, true)
	if err == nil || ns == "" {
		t.Fatalf("cancelled probe: namespace %q, err %v; want the namespace it made and an error", ns, err)
	}
	if namespaces.Exists(ns) {
		t.Errorf("the cancelled probe left %s behind", ns)
		namespaces.Delete(ns)
	}
}
