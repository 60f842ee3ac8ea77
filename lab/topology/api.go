package topology

// This file fixes the package's API; the implementation lives beside it.

// Load reads, validates and allocates the topology in the file at path.
//   func Load(path string) (*Topology, error)
// Parse does the same for data read from source (a path or "<embedded>/web.yaml").
//   func Parse(source string, data []byte) (*Topology, error)
// Default is the embedded topologies/web.yaml.
//   func Default() (*Topology, error)
// EndpointSlices are the user's slices plus those the EndpointSlice controller
// derives from every selector.
//   func (t *Topology) EndpointSlices() []discoveryv1.EndpointSlice
