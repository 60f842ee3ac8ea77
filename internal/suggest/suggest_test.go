package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"mode", "mode", 0}, {"mdoe", "mode", 2}, {"backend", "backnd", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	flags := []string{"mode", "backend", "file", "flows", "plan"}
	for word, want := range map[string]string{"backnd": "backend", "MODE": "mode", "flow": "flows", "scheduler": ""} {
		if got := Closest(word, flags, 2); got != want {
			t.Errorf("Closest(%q) = %q, want %q", word, got, want)
		}
	}
}
