package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

// Chain name prefixes of the per-Service chains. KUBE-XLB- is the Local-policy
// chain of releases before 1.24; KUBE-SVL- and KUBE-EXT- replaced it then.
const (
	prefixSVC = "KUBE-SVC-"
	prefixSVL = "KUBE-SVL-"
	prefixEXT = "KUBE-EXT-"
	prefixFW  = "KUBE-FW-"
	prefixXLB = "KUBE-XLB-"
	prefixSEP = "KUBE-SEP-"
)

// hash16 is how kube-proxy fits names into iptables' 28-character chain names: the
// first 16 characters of the base32 form of the SHA-256 of the text.
func hash16(text string) string {
	sum := sha256.Sum256([]byte(text))
	// base32 turns each 5 bytes into 8 characters on its own, so the first 10
	// bytes give exactly the first 16 characters of the whole sum's encoding.
	return base32.StdEncoding.EncodeToString(sum[:10])
}

// endpointChain names a KUBE-SEP- chain; the endpoint "ip:port" joins the hash.
func endpointChain(portName, protocol, endpoint string) string {
	return prefixSEP + hash16(portName+protocol+endpoint)
}

// isServiceChain tells whether a nat chain is one of the per-Service chains kube-proxy
// deletes when no Service needs it any more.
func isServiceChain(name string) bool {
	for _, p := range []string{prefixSVC, prefixSVL, prefixEXT, prefixFW, prefixXLB, prefixSEP} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// portNames are the names of one ServicePort's chains under one release.
type portNames struct {
	// portName is ServicePortName as the release prints it in comments and hashes.
	portName string
	protocol string
	svc      string
	svl      string
	ext      string
	fw       string
	xlb      string
	// seps caches KUBE-SEP- names by endpoint: an endpoint's name is written
	// by its own chain and by every policy chain that jumps to it.
	seps map[string]string
}

func namesOf(sp *proxy.ServicePort, v version.Version) portNames {
	n := portNames{
		portName: sp.Name.String(v),
		protocol: strings.ToLower(string(sp.Protocol)),
	}
	// A per-Service chain is its prefix plus the hash of the ServicePortName as
	// the release prints it and the lower-case protocol: the same text for
	// every prefix.
	h := hash16(n.portName + n.protocol)
	n.svc, n.svl, n.ext, n.fw, n.xlb = prefixSVC+h, prefixSVL+h, prefixEXT+h, prefixFW+h, prefixXLB+h
	n.seps = map[string]string{}
	return n
}

func (n portNames) sep(e proxy.Endpoint) string {
	ep := e.String()
	name, ok := n.seps[ep]
	if !ok {
		name = endpointChain(n.portName, n.protocol, ep)
		n.seps[ep] = name
	}
	return name
}
