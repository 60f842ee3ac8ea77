package topology

import (
	"fmt"
	"strings"
)

// suggest offers the field the user probably meant: same letters in another
// case, or a small typo; otherwise the known fields when they are few.
func suggest(k string, fs []jsonField) string {
	best, bestDist := "", 3
	for _, f := range fs {
		if strings.EqualFold(f.name, k) {
			return fmt.Sprintf("; did you mean %q? (field names are case-sensitive)", f.name)
		}
		if dist := editDistance(strings.ToLower(k), strings.ToLower(f.name)); dist < bestDist {
			best, bestDist = f.name, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	if len(fs) <= 20 {
		names := make([]string, len(fs))
		for i, f := range fs {
			names[i] = f.name
		}
		return "; known fields: " + strings.Join(names, ", ")
	}
	return ""
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
