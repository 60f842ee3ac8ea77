package lab

import (
	"crypto/rand"

	"github.com/svclab/svclab/lab/record"
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
