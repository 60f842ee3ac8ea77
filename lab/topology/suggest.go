package topology

import (
	"fmt"
	"strings"

	names "github.com/svclab/svclab/internal/suggest"
)

// suggest offers the field the user probably meant: same letters in another
// case, or a small typo; otherwise the known fields when they are few.
func suggest(k string, fs []jsonField) string {
	known := make([]string, len(fs))
	for i, f := range fs {
		if strings.EqualFold(f.name, k) {
			return fmt.Sprintf("; did you mean %q? (field names are case-sensitive)", f.name)
		}
		known[i] = f.name
	}
	if best := names.Closest(k, known, 2); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	if len(fs) <= 20 {
		return "; known fields: " + strings.Join(known, ", ")
	}
	return ""
}
