// Package topologies holds the labs shipped with svclab; web.yaml is the default.
package topologies

import "embed"

// Files holds every shipped topology, so the binary runs without the repository.
//
//go:embed *.yaml
var Files embed.FS

// DefaultName is the file `svclab` uses when no -f is given.
const DefaultName = "web.yaml"

// Flows holds the shipped flows files: flows/NAME.yaml pins flows of NAME.yaml, for
// `svclab verify --flows NAME`.
//
//go:embed flows/*.yaml
var Flows embed.FS
