package topology

import (
	"strconv"
	"strings"
)

// Field paths name a place in the lab file the way Kubernetes does:
// "services[0].spec.ports[1].nodePort", "pods[2].labels[app]".

func child(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func key(path, k string) string { return path + "[" + k + "]" }

// parentPath drops the last element of a path; "" has no parent.
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndex(path, "["); i >= 0 {
			return path[:i]
		}
		return ""
	}
	if i := strings.LastIndexAny(path, ".]"); i >= 0 {
		if path[i] == ']' {
			return path[:i+1]
		}
		return path[:i]
	}
	return ""
}

// Positions maps each field path present in a file read by DecodeYAML to the line
// it starts on.
type Positions map[string]int

// Line is the line of path, or of its nearest ancestor present in the file: a
// missing field is reported where its parent object starts.
func (p Positions) Line(path string) int {
	for {
		if l, ok := p[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}
