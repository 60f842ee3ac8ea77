// Package version names kube-proxy releases: svclab's proxiers reproduce the rules
// of one release, chosen by the topology or the command line, and the topology
// checks the name it is given.
package version

import "fmt"

// Version is a kube-proxy minor release; its rules changed shape between releases.
type Version struct{ Major, Minor int }

// Default is the kube-proxy release svclab reproduces unless told otherwise.
var Default = Version{1, 37}

// Oldest is the oldest kube-proxy release whose rules svclab reproduces.
var Oldest = Version{1, 11}

// ParseVersion reads "1.18" or "v1.18" (a patch level is accepted and ignored).
func Parse(s string) (Version, error) {
	if s == "" {
		return Default, nil
	}
	var v Version
	var patch int
	in := s
	if in[0] == 'v' {
		in = in[1:]
	}
	n, _ := fmt.Sscanf(in, "%d.%d.%d", &v.Major, &v.Minor, &patch)
	if n < 2 || v.Major != 1 || v.Minor < 0 {
		return Version{}, fmt.Errorf("kube-proxy version %q: want 1.MINOR, such as 1.18 or 1.37", s)
	}
	if v.Minor < Oldest.Minor || v.Minor > Default.Minor {
		return Version{}, fmt.Errorf("kube-proxy version %q: svclab reproduces %s to %s", s, Oldest, Default)
	}
	return v, nil
}

// AtLeast tells whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }
