package importer

import (
	"fmt"

	"github.com/svclab/svclab/lab/topology"
)

// Import reads the dump at paths, builds its topology and encodes it, and
// checks the file as svclab reads any lab: a file it would refuse is a bug
// here, never handed on.
func Import(paths []string, o Options) ([]byte, *Result, error) {
	d, err := Read(paths)
	if err != nil {
		return nil, nil, err
	}
	res, err := Build(d, o)
	if err != nil {
		return nil, nil, err
	}
	data, err := res.Encode(paths)
	if err != nil {
		return nil, nil, fmt.Errorf("import: encoding the topology: %w", err)
	}
	if _, err := topology.Parse("<imported>", data); err != nil {
		// Not an ErrorList: the input was read, the fault is the importer's.
		return data, res, fmt.Errorf("import: the topology made of %v does not pass svclab's validation (a bug in svclab import): %v", paths, err)
	}
	return data, res, nil
}
