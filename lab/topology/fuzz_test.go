package topology

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes, seeded with every shipped and broken
// lab. Parse must never panic; what it rejects it rejects with a sorted
// ErrorList; what it accepts must survive being written back and resolved
// again (which is how every mutation works) unchanged.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bad/*.yaml")
	seeds = append(seeds, "../../topologies/web.yaml", "../../topologies/httpd.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		top, err := Parse("fuzz.yaml", data)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T is not a non-empty ErrorList: %v", err, err)
			}
			if !sort.SliceIsSorted(list, func(i, j int) bool { return list[i].Line < list[j].Line }) {
				t.Fatalf("errors not sorted by line:\n%v", err)
			}
			return
		}
		again, errs := resolve(top.Source, top.file(), nil)
		if len(errs) > 0 {
			t.Fatalf("an accepted lab fails when written back:\n%v", errs)
		}
		// The declared Services are the input as written, allocation aside;
		// written back, they carry the allocation.
		again.DeclaredServices, top.DeclaredServices = nil, nil
		if !reflect.DeepEqual(again, top) {
			t.Fatalf("an accepted lab changes when written back and resolved again")
		}
		top.EndpointSlices()
		top.Clone()
	})
}
