package topology

import "strings"

// maxMemberBase leaves room, in a DNS label's 63 characters, for the "-N" that
// keeps a member name unique.
const maxMemberBase = 55

// MemberBase is name as a member name can hold it: a DNS label (lower case,
// letters, digits and '-'), of at most 55 characters. A cluster's names need
// not be labels (EKS names nodes ip-10-0-1-5.ec2.internal); `svclab import`
// names members so, and `svclab compare --node` finds a node by the cluster's
// name the same way.
func MemberBase(name string) string {
	n := strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name))
	n = strings.Trim(n, "-")
	if len(n) > maxMemberBase {
		n = strings.TrimRight(n[:maxMemberBase], "-")
	}
	return n
}
