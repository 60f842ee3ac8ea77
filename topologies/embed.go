// Package topologies holds the labs shipped with svclab; web.yaml is the default.
package topologies

import "embed"

// Files holds every shipped topology, so the binary runs without the repository.
//
//go:embed *.yaml
var Files embed.FS

// DefaultName is the file `svclab` uses when no -f is given.
const DefaultName = "web.yaml"
