package topology

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.err from what Parse reports")

// TestBadFiles parses every file of the corpus of mistakes and compares the
// errors with the golden NAME.err beside NAME.yaml. Run with -update to rewrite
// the goldens after a deliberate change, then read the diff.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("the corpus has %d files; it should cover every rule", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			top, err := Parse(file, data)
			if err == nil {
				t.Fatalf("parsed without error into lab %q", top.Name)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList: %v", err, err)
			}
			checkErrorList(t, file, list)
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// checkErrorList holds what every error list promises: sorted by line, each
// error from the file, with a line unless the file as a whole is at fault.
func checkErrorList(t *testing.T, file string, list ErrorList) {
	t.Helper()
	if !sort.SliceIsSorted(list, func(i, j int) bool { return list[i].Line < list[j].Line }) {
		t.Errorf("errors not sorted by line:\n%v", list)
	}
	for _, e := range list {
		if e.Source != file {
			t.Errorf("error %q names source %q, want %q", e.Error(), e.Source, file)
		}
		if e.Line == 0 && filepath.Base(file) != "empty.yaml" {
			t.Errorf("error %q has no line", e.Error())
		}
	}
	if got := len(strings.Split(list.Error(), "\n")); got != len(list) {
		t.Errorf("Error() prints %d lines for %d errors", got, len(list))
	}
	var one *Error
	if !errors.As(list, &one) || *one != list[0] {
		t.Errorf("errors.As does not find the first *Error in the list")
	}
}
