package kube

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultClusterDomain is the DNS domain of a lab's Services, as kubeadm's default.
const DefaultClusterDomain = "cluster.local"

// AdminUser is the user the admin token authenticates as; its group
// system:masters passes every RBAC check.
const AdminUser = "svclab-admin"

// PKIConfig says what a lab's credentials must name.
type PKIConfig struct {
	// Dir receives the files (created with mode 0700).
	Dir string
	// APIServer is the address the API server listens on and clients dial.
	APIServer netip.Addr
	// ServiceCIDR is the service range; its first address is the `kubernetes`
	// Service's ClusterIP, which pods dial.
	ServiceCIDR netip.Prefix
	// ClusterDomain is the Services' DNS domain; empty: DefaultClusterDomain.
	ClusterDomain string
}

// PKI names the credential files of one lab and its admin token. Keys are ECDSA
// P-256: generated in microseconds (a lab is built in a fraction of a second, RSA
// keys would dominate), and accepted by the API server for serving and for
// service account tokens (ES256).
type PKI struct {
	Dir string
	// CACert signs ServerCert; clients trust it. Its key is not kept: nothing else
	// is ever signed.
	CACert string
	// ServerCert and ServerKey are the API server's serving certificate.
	ServerCert, ServerKey string
	// ServiceAccountKey (private) signs service account tokens;
	// ServiceAccountPub verifies them.
	ServiceAccountKey, ServiceAccountPub string
	// TokenFile is the API server's --token-auth-file: AdminToken for AdminUser in
	// system:masters. One bearer token serves kubectl and every component: the lab
	// tests Services, not authorization.
	TokenFile  string
	AdminToken string
}

// pkiFiles names the files of a PKI in dir.
func pkiFiles(dir string) *PKI {
	return &PKI{
		Dir:               dir,
		CACert:            filepath.Join(dir, "ca.crt"),
		ServerCert:        filepath.Join(dir, "apiserver.crt"),
		ServerKey:         filepath.Join(dir, "apiserver.key"),
		ServiceAccountKey: filepath.Join(dir, "sa.key"),
		ServiceAccountPub: filepath.Join(dir, "sa.pub"),
		TokenFile:         filepath.Join(dir, "tokens.csv"),
	}
}

// NewPKI creates a lab's credentials in c.Dir: a CA, the API server's serving
// certificate (IP SANs: its address, the `kubernetes` Service's ClusterIP,
// 127.0.0.1; DNS SANs: kubernetes, kubernetes.default, kubernetes.default.svc,
// kubernetes.default.svc.<domain>), a service account key pair and the token file.
func NewPKI(c PKIConfig) (*PKI, error) {
	if !c.APIServer.Is4() {
		return nil, fmt.Errorf("pki: API server address %v: want an IPv4 address", c.APIServer)
	}
	kubeSvc, err := FirstServiceIP(c.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	domain := c.ClusterDomain
	if domain == "" {
		domain = DefaultClusterDomain
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p := pkiFiles(c.Dir)

	now := time.Now()
	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "svclab-ca"},
		NotBefore:             now.Add(-time.Hour), // tolerate clocks a little behind
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}

	serverKey, err := newKey()
	if err != nil {
		return nil, err
	}
	serverTmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   caTmpl.NotBefore,
		NotAfter:    caTmpl.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{c.APIServer.AsSlice(), kubeSvc.AsSlice(), net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + domain},
	}
	serverDER, err := sign(serverTmpl, ca, serverKey.Public(), caKey)
	if err != nil {
		return nil, err
	}

	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}

	serverKeyPEM, err := keyPEM(serverKey)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, err
	}

	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p.AdminToken = hex.EncodeToString(token)

	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{p.CACert, pemBlock("CERTIFICATE", caDER), 0o644},
		{p.ServerCert, pemBlock("CERTIFICATE", serverDER), 0o644},
		{p.ServerKey, serverKeyPEM, 0o600},
		{p.ServiceAccountKey, saKeyPEM, 0o600},
		{p.ServiceAccountPub, pemBlock("PUBLIC KEY", saPub), 0o644},
		// token,user,uid,"group,..." as the API server's --token-auth-file reads it.
		{p.TokenFile, []byte(fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", p.AdminToken, AdminUser, AdminUser)), 0o600},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
	}
	return p, nil
}

// LoadPKI reads back the credentials NewPKI wrote in dir (for a process other than
// the one that made the lab).
func LoadPKI(dir string) (*PKI, error) {
	p := pkiFiles(dir)
	b, err := os.ReadFile(p.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	token, _, ok := strings.Cut(string(b), ",")
	if !ok || token == "" {
		return nil, fmt.Errorf("pki: %s: no token", p.TokenFile)
	}
	p.AdminToken = token
	return p, nil
}

// FirstServiceIP is the first address of the service range, which the API
// server gives the `kubernetes` Service.
func FirstServiceIP(serviceCIDR netip.Prefix) (netip.Addr, error) {
	if !serviceCIDR.IsValid() || !serviceCIDR.Addr().Is4() || serviceCIDR.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("service CIDR %v: want an IPv4 prefix of at most /30", serviceCIDR)
	}
	return serviceCIDR.Masked().Addr().Next(), nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate key: %w", err)
	}
	return k, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %s: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// keyPEM encodes a private key as PEM "PRIVATE KEY" (PKCS #8).
func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}
