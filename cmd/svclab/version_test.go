package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/version"
)

func rootCmd(args ...string) (string, error) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestVersion: `svclab version` and `svclab --version` print the same: svclab's
// version, the kube-proxy releases reproduced, the pinned Kubernetes release and
// what the component binary says of itself (here a stand-in script: the real one
// takes minutes to build).
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "svclab-kube")
	script := "#!/bin/sh\nprintf 'kubernetes v1.37.2\\netcd 3.7.2\\ncoredns 1.15.0\\ngo go1.26.8\\n'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(kube.BinaryEnv, bin)
	sub, err := rootCmd("version")
	if err != nil {
		t.Fatal(err)
	}
	flag, err := rootCmd("--version")
	if err != nil {
		t.Fatal(err)
	}
	if sub != flag {
		t.Errorf("svclab version:\n%s\nsvclab --version:\n%s", sub, flag)
	}
	for _, want := range []string{"svclab ", "Kubernetes components: " + kube.Version, version.Oldest.String() + " to " + version.Default.String(),
		"binary: " + bin, "  etcd 3.7.2\n", "  coredns 1.15.0\n"} {
		if !strings.Contains(sub, want) {
			t.Errorf("svclab version lacks %q:\n%s", want, sub)
		}
	}
	out, err := rootCmd("version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v versions
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Components != kube.Version || v.Binary != bin || len(v.BinaryVersions) != 4 {
		t.Errorf("svclab version --json: %v: %+v\n%s", err, v, out)
	}
	// A binary that is no component binary is reported, not trusted.
	t.Setenv(kube.BinaryEnv, "/bin/true")
	if out, err := rootCmd("version"); err != nil || !strings.Contains(out, "not a svclab-kube's versions") {
		t.Errorf("with /bin/true as the binary: %v\n%s", err, out)
	}
}
