package proxy

import (
	"fmt"
	"os"
)

// Prepare checks what every proxier needs before it opens a node: a node
// namespace to program (svclab never programs its own), what the mode needs of
// the kernel and its programs (checks, in order), and the run directory for its
// files.
func Prepare(mode string, t Target, checks ...func() error) error {
	if t.NetNS == "" {
		return fmt.Errorf("%s proxier: no node network namespace (svclab never programs its own)", mode)
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	if t.RunDir != "" {
		if err := os.MkdirAll(t.RunDir, 0o755); err != nil {
			return fmt.Errorf("%s proxier: %w", mode, err)
		}
	}
	return nil
}
