package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestTraceUsage: wrong arguments are usage errors (exit 2), named, before any
// privilege check or lab.
func TestTraceUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"client"}, "accepts between 2 and 3 arg(s)"},
		{[]string{"web-x", "client", "10.96.0.10"}, `DEST:PORT "10.96.0.10"`},
		{[]string{"client", "10.96.0.10:http"}, `DEST:PORT "10.96.0.10:http"`},
		{[]string{"web-x", "client", "10.96.0.10:80", "--mode", "ipvs"}, "the lab flags are for a throwaway lab"},
	} {
		cmd := newTraceCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("trace %v: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
