package kube

import (
	"encoding/base64"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestKubeconfig(t *testing.T) {
	dir := t.TempDir()
	p, err := NewPKI(PKIConfig{Dir: dir, APIServer: netip.MustParseAddr("192.168.1.2"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12")})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(path, "svclab-web", "https://192.168.1.2:6443", p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Read back as client-go's format names the fields.
	var got struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Clusters   []struct {
			Name    string
			Cluster map[string]string
		}
		Users []struct {
			Name string
			User map[string]string
		}
		Contexts []struct {
			Name    string
			Context map[string]string
		}
		CurrentContext string `yaml:"current-context"`
	}
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(p.CACert)
	if got.APIVersion != "v1" || got.Kind != "Config" || got.CurrentContext != "svclab-web" ||
		len(got.Clusters) != 1 || got.Clusters[0].Name != "svclab-web" || got.Clusters[0].Cluster["server"] != "https://192.168.1.2:6443" ||
		got.Clusters[0].Cluster["certificate-authority-data"] != base64.StdEncoding.EncodeToString(ca) ||
		len(got.Users) != 1 || got.Users[0].User["token"] != p.AdminToken ||
		len(got.Contexts) != 1 || got.Contexts[0].Context["cluster"] != "svclab-web" || got.Contexts[0].Context["user"] != "svclab-web" {
		t.Errorf("kubeconfig:\n%s", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, want 0600: it holds the token", fi.Mode().Perm())
	}
}

func TestCorefile(t *testing.T) {
	got, err := Corefile(CorefileConfig{Kubeconfig: "/run/svclab/x/kubeconfig", QueryLog: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `.:53 {
    errors
    log
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
       kubeconfig /run/svclab/x/kubeconfig
    }
    prometheus :9153
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loadbalance
}
`
	if got != want {
		t.Errorf("Corefile:\n%s\nwant:\n%s", got, want)
	}
	if _, err := Corefile(CorefileConfig{Kubeconfig: "/a path/with blank"}); err == nil {
		t.Errorf("a kubeconfig path with a blank was accepted into the Corefile")
	}
}
