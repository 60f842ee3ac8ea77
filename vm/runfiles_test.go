package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The generated script is run by the host's dash with the command replaced by
// printf, to show that arguments and environment arrive byte for byte.
func TestRunScriptQuoting(t *testing.T) {
	dash, err := exec.LookPath("dash")
	if err != nil {
		t.Fatal("dash is needed: it is the shell the guest runs the command with")
	}
	args := []string{"printf", `[%s]\n`, "plain", "two words", "it's", `$HOME "x" \n`, "", "*"}
	script := runScript(Config{
		Command: args,
		Env:     map[string]string{"ODD": "a'b $c `d`"},
	})
	// The guest's working directory does not exist here.
	script = strings.Replace(script, "cd '/svclab' || exit 127\n", "", 1)
	script = strings.Replace(script, "exec ", "printf '%s\\n' \"$ODD\"; exec ", 1)
	file := filepath.Join(t.TempDir(), "run.sh")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dash, file).CombinedOutput()
	if err != nil {
		t.Fatalf("dash %s: %v\n%s\nscript:\n%s", file, err, out, script)
	}
	want := "a'b $c `d`\n[plain]\n[two words]\n[it's]\n[$HOME \"x\" \\n]\n[]\n[*]\n"
	if string(out) != want {
		t.Errorf("output %q, want %q\nscript:\n%s", out, want, script)
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	c, err := Config{Command: []string{"true"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Accel != AccelAuto || c.CPUs != DefaultCPUs || c.MemoryMiB != DefaultMemoryMiB ||
		c.Timeout != DefaultTimeout || c.CacheDir != DefaultCacheDir {
		t.Errorf("defaults not applied: %+v", c)
	}
	for _, bad := range []Config{
		{},
		{Command: []string{"true"}, Accel: "hvf"},
		{Command: []string{"true"}, Env: map[string]string{"A-B": "x"}},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v) accepted", bad)
		}
	}
}
