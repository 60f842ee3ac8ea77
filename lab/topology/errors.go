package topology

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a lab file, placed as precisely as the YAML allows.
type Error struct {
	// Source is the file (or "<embedded>/NAME", or the mutation that failed).
	Source string
	// Line is 1-based; 0 when no line is known (a mutation, a file-level problem).
	Line int
	// Path is the field path, such as "services[0].spec.ports[0].nodePort"; empty
	// for the document as a whole.
	Path string
	Msg  string
}

func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one lab file, sorted by line. Validation
// goes on after the first problem so that one run shows them all.
type ErrorList []Error

// Error prints one problem a line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives each problem as a *Error, so that errors.As finds one.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i := range l {
		errs[i] = &l[i]
	}
	return errs
}

// sorted orders the list by line; problems without a line (the document as a
// whole) come first, and problems on one line keep the order they were found in.
func (l ErrorList) sorted() ErrorList {
	out := append(ErrorList(nil), l...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

// Err is the list sorted by line as an error, or nil when it is empty, so that a
// caller's err != nil test means what it says.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l.sorted()
}
