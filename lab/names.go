package lab

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/svclab/svclab/lab/record"
)

// fabricMember is the reserved member name of the namespace that holds the node
// network's bridge.
const fabricMember = "fabric"

// Interface names inside lab namespaces. Every one fits IFNAMSIZ (15 characters).
const (
	fabricBridge = "br0"  // the node network's switch, in the fabric namespace
	podBridge    = "cni0" // the bridge CNI plugin's default bridge name
	eth0         = "eth0"
)

// newRunID is four random base32 characters: enough that two labs from one file,
// or parallel Ginkgo processes, do not collide, short enough to read.
func NewRunID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var b [4]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// namespaceName is svclab-<lab>-<member>-<run>.
func namespaceName(lab, member, run string) string {
	return record.NamespacePrefix + lab + "-" + member + "-" + run
}

// labID names a running lab: <lab>-<run>.
func labID(lab, run string) string { return lab + "-" + run }

// fabricPort is the fabric-side end of a node's or client's eth0: n0, n1, ... and
// c0, c1, ..., by position in the topology, since member names can be longer than
// an interface name may be.
func fabricPort(kind string, index int) string {
	return fmt.Sprintf("%c%d", kind[0], index)
}

// controlPlanePort is the fabric-side end of the control plane's eth0.
const controlPlanePort = "cp0"

// podVeth is the node-side end of a pod's eth0, named like the bridge CNI plugin's
// (veth + 8 hex characters), derived from the pod and the run so it is stable.
func podVeth(podKey, run string) string {
	sum := sha256.Sum256([]byte(podKey + "/" + run))
	return "veth" + hex.EncodeToString(sum[:4])
}
