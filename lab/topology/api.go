package topology

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/svclab/svclab/topologies"
)

// Load reads, validates and allocates the topology in the file at path. A lab
// with mistakes gives an ErrorList naming each.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return Parse(path, data)
}

// Parse does what Load does for data read from source, the name errors give
// (a path, or "<embedded>/web.yaml").
func Parse(source string, data []byte) (*Topology, error) {
	f, pos, errs := decodeFile(source, data)
	if f == nil {
		return nil, errs.Err()
	}
	t, more := resolve(source, f, pos)
	if errs = append(errs, more...); len(errs) > 0 {
		return nil, errs.Err()
	}
	return t, nil
}

// Default is the shipped topologies/web.yaml.
func Default() (*Topology, error) { return Embedded(topologies.DefaultName) }

// Embedded is a shipped topology by file name ("web.yaml"; the ".yaml" may be
// left out).
func Embedded(name string) (*Topology, error) {
	if !strings.HasSuffix(name, ".yaml") {
		name += ".yaml"
	}
	data, err := fs.ReadFile(topologies.Files, name)
	if err != nil {
		return nil, fmt.Errorf("topology %s: not a shipped topology (shipped: %s)", name, strings.Join(EmbeddedNames(), ", "))
	}
	return Parse(path.Join("<embedded>", name), data)
}

// EmbeddedNames lists the shipped topologies by file name.
func EmbeddedNames() []string {
	names, _ := fs.Glob(topologies.Files, "*.yaml")
	return names
}
