package kube

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	p, err := NewPKI(PKIConfig{
		Dir:         dir,
		APIServer:   netip.MustParseAddr("192.168.1.2"),
		ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, p.CACert)
	server := readCert(t, p.ServerCert)
	if !ca.IsCA {
		t.Errorf("CA certificate is not a CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	// Every name a client inside the lab may dial must verify against the CA.
	for _, name := range []string{"192.168.1.2", "10.96.0.1", "127.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
		if _, err := server.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	// Negative control: a name not in the certificate must not verify.
	if _, err := server.Verify(x509.VerifyOptions{Roots: roots, DNSName: "192.168.1.3"}); err == nil {
		t.Errorf("server certificate verifies for 192.168.1.3, which it does not name")
	}
	// And a certificate from another lab's CA must not verify against this one.
	other, err := NewPKI(PKIConfig{Dir: filepath.Join(t.TempDir(), "other"), APIServer: netip.MustParseAddr("192.168.1.2"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readCert(t, other.ServerCert).Verify(x509.VerifyOptions{Roots: roots, DNSName: "kubernetes"}); err == nil {
		t.Errorf("another lab's server certificate verifies against this lab's CA")
	}
	wantIPs := []net.IP{net.ParseIP("192.168.1.2"), net.ParseIP("10.96.0.1"), net.ParseIP("127.0.0.1")}
	if len(server.IPAddresses) != len(wantIPs) {
		t.Errorf("IP SANs %v, want %v", server.IPAddresses, wantIPs)
	}

	// The key files hold the keys of the certificate and of each other.
	serverKey := readKey(t, p.ServerKey)
	if !serverKey.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(server.PublicKey) {
		t.Errorf("apiserver.key does not match apiserver.crt")
	}
	saKey := readKey(t, p.ServiceAccountKey)
	saPub, err := x509.ParsePKIXPublicKey(pemBytes(t, p.ServiceAccountPub, "PUBLIC KEY"))
	if err != nil {
		t.Fatal(err)
	}
	if !saKey.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(saPub) {
		t.Errorf("sa.pub is not sa.key's public key")
	}

	tokens, err := os.ReadFile(p.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := p.AdminToken + ",svclab-admin,svclab-admin,\"system:masters\"\n"; string(tokens) != want {
		t.Errorf("token file %q, want %q", tokens, want)
	}
	for _, f := range []string{p.ServerKey, p.ServiceAccountKey, p.TokenFile} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", f, fi.Mode().Perm(), err)
		}
	}
	loaded, err := LoadPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *loaded != *p {
		t.Errorf("LoadPKI = %+v, want %+v", loaded, p)
	}
}

func TestPKIDomainAndBadInput(t *testing.T) {
	p, err := NewPKI(PKIConfig{Dir: t.TempDir(), APIServer: netip.MustParseAddr("10.0.0.2"), ServiceCIDR: netip.MustParsePrefix("172.20.0.0/16"), ClusterDomain: "lab.example"})
	if err != nil {
		t.Fatal(err)
	}
	c := readCert(t, p.ServerCert)
	if !slices.Contains(c.DNSNames, "kubernetes.default.svc.lab.example") || slices.Contains(c.DNSNames, "kubernetes.default.svc.cluster.local") {
		t.Errorf("DNS SANs %v: want the lab's domain only", c.DNSNames)
	}
	if !slices.ContainsFunc(c.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("172.20.0.1")) }) {
		t.Errorf("IP SANs %v lack the kubernetes Service's 172.20.0.1", c.IPAddresses)
	}
	for _, bad := range []PKIConfig{
		{Dir: t.TempDir(), APIServer: netip.MustParseAddr("fd00::1"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12")},
		{Dir: t.TempDir(), APIServer: netip.MustParseAddr("10.0.0.2"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/31")},
		{Dir: t.TempDir(), APIServer: netip.MustParseAddr("10.0.0.2")},
	} {
		if _, err := NewPKI(bad); err == nil || !strings.HasPrefix(err.Error(), "pki: ") {
			t.Errorf("NewPKI(%+v) = %v, want a pki error", bad, err)
		}
	}
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(pemBytes(t, file, "CERTIFICATE"))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c
}

func readKey(t *testing.T, file string) crypto.Signer {
	t.Helper()
	k, err := x509.ParsePKCS8PrivateKey(pemBytes(t, file, "PRIVATE KEY"))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return k.(crypto.Signer)
}

func pemBytes(t *testing.T, file, kind string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != kind || len(strings.TrimSpace(string(rest))) != 0 {
		t.Fatalf("%s: want exactly one PEM %s block", file, kind)
	}
	return blk.Bytes
}
