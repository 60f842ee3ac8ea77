package kube

import (
	"encoding/base64"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

// kubeconfig is the part of client-go's kubeconfig format (clientcmd/api/v1)
// a lab writes: one cluster, one user, one context. Written by hand rather than
// with client-go's types, which would pull client-go into svclab for one file.
type kubeconfig struct {
	APIVersion     string         `yaml:"apiVersion"`
	Kind           string         `yaml:"kind"`
	Clusters       []namedCluster `yaml:"clusters"`
	Users          []namedUser    `yaml:"users"`
	Contexts       []namedContext `yaml:"contexts"`
	CurrentContext string         `yaml:"current-context"`
}

type namedCluster struct {
	Name    string `yaml:"name"`
	Cluster struct {
		Server                   string `yaml:"server"`
		CertificateAuthorityData string `yaml:"certificate-authority-data"` // base64 of PEM
	} `yaml:"cluster"`
}

type namedUser struct {
	Name string `yaml:"name"`
	User struct {
		Token string `yaml:"token"`
	} `yaml:"user"`
}

type namedContext struct {
	Name    string `yaml:"name"`
	Context struct {
		Cluster string `yaml:"cluster"`
		User    string `yaml:"user"`
	} `yaml:"context"`
}

// WriteKubeconfig writes a kubeconfig at path for the API server at server (an
// https URL) whose cluster, user and context are all called name: it trusts p's
// CA (embedded, so the file stands alone) and authenticates with p's admin token.
// kubectl, kube-proxy, the controller manager and CoreDNS all read it. The file
// holds the token, so only its owner may read it. It appears whole (by rename):
// components started with --wait-for on it read it as soon as it exists.
func WriteKubeconfig(path, name, server string, p *PKI) error {
	ca, err := os.ReadFile(p.CACert)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	var c namedCluster
	c.Name = name
	c.Cluster.Server = server
	c.Cluster.CertificateAuthorityData = base64.StdEncoding.EncodeToString(ca)
	var u namedUser
	u.Name = name
	u.User.Token = p.AdminToken
	var x namedContext
	x.Name = name
	x.Context.Cluster = name
	x.Context.User = name
	b, err := yaml.Marshal(kubeconfig{
		APIVersion: "v1", Kind: "Config",
		Clusters: []namedCluster{c}, Users: []namedUser{u}, Contexts: []namedContext{x},
		CurrentContext: name,
	})
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}
