package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The README's claims that code can check: the commands and flags it names
// exist, the repository paths it names exist, and the CI steps it lists are
// scripts/test.sh's. It runs in CI with the Go tests of ./cmd/...

const readmePath = "../../README.md"

// readmeCode is the code of README.md: its inline code spans and the lines of
// its fenced blocks, each with its line number.
func readmeCode(t *testing.T) (code []string, lines []int) {
	t.Helper()
	f, err := os.Open(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	span := regexp.MustCompile("`([^`]+)`")
	fenced := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			code, lines = append(code, l), append(lines, n)
			continue
		}
		for _, m := range span.FindAllStringSubmatch(l, -1) {
			code, lines = append(code, m[1]), append(lines, n)
		}
	}
	return code, lines
}

// TestReadmeCommandsAndFlags: every `svclab CMD ... --flag` in the README's code
// names a command svclab has and flags that command takes.
func TestReadmeCommandsAndFlags(t *testing.T) {
	root := newRootCommand()
	// What cobra adds when it runs: help, completion, --version.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.InitDefaultVersionFlag()
	code, lines := readmeCode(t)
	invocation := regexp.MustCompile(`(?:^|[\s(|$])svclab((?:\s+[^\s#|;&)]+)*)`)
	checked := 0
	for i, c := range code {
		for _, m := range invocation.FindAllStringSubmatch(c, -1) {
			words := strings.Fields(strings.NewReplacer("[", " ", "]", " ", `\|`, " ").Replace(m[1]))
			checkInvocation(t, root, words, lines[i])
			checked++
		}
	}
	if checked < 50 {
		t.Errorf("only %d svclab commands found in the README: is the pattern wrong?", checked)
	}
}

// checkInvocation checks svclab WORDS: the command words name a command, and the
// flags up to a "--" are its flags.
func checkInvocation(t *testing.T, root *cobra.Command, words []string, line int) {
	t.Helper()
	cmd := root
	i := 0
	for ; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") || !cmd.HasSubCommands() {
			break
		}
		sub, _, err := cmd.Find([]string{w})
		if err != nil || sub == cmd {
			// A placeholder (svclab ARGS) or an argument.
			if strings.ToUpper(w) != w && cmd == root {
				t.Errorf("README.md:%d: svclab %s: no command %q", line, strings.Join(words, " "), w)
			}
			return
		}
		cmd = sub
	}
	for ; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			return
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		name = strings.TrimRight(name, ".,:;`'\")")
		var ok bool
		if strings.HasPrefix(w, "--") {
			ok = cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil || name == "help"
		} else {
			ok = len(name) == 1 && (cmd.Flags().ShorthandLookup(name) != nil || name == "h")
		}
		if !ok {
			t.Errorf("README.md:%d: svclab %s: %s takes no flag %s", line, strings.Join(words, " "), cmd.CommandPath(), w)
		}
	}
}

// TestReadmePaths: every path of this repository the README names exists.
func TestReadmePaths(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	top, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range top {
		if e.IsDir() && e.Name() != ".git" {
			dirs = append(dirs, regexp.QuoteMeta(e.Name()))
		}
	}
	path := regexp.MustCompile(`(?:^|[\s(\x60"'])(?:\./)?((?:` + strings.Join(dirs, "|") + `)/[A-Za-z0-9_./-]*|Vagrantfile|go\.mod|go\.sum)`)
	checked := 0
	for n, l := range strings.Split(string(data), "\n") {
		for _, m := range path.FindAllStringSubmatch(l, -1) {
			p := strings.TrimRight(m[1], ".,:;")
			if strings.Contains(p, "...") {
				p = p[:strings.Index(p, "...")]
			}
			if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
				t.Errorf("README.md:%d: %s: %v", n+1, m[1], err)
			}
			checked++
		}
	}
	if checked < 30 {
		t.Errorf("only %d paths found in the README: is the pattern wrong?", checked)
	}
}

// TestReadmeCISteps: the steps the README lists for scripts/test.sh are the
// script's step lines, in order (a shell expansion in a step's title, such as
// the kernel release, left out).
func TestReadmeCISteps(t *testing.T) {
	script, err := os.ReadFile("../../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	stepLine := regexp.MustCompile(`(?m)^step "(.*)"$`)
	expansion := regexp.MustCompile(`\s*\(?\$\([^)]*\)\)?`)
	var want []string
	for _, m := range stepLine.FindAllStringSubmatch(string(script), -1) {
		want = append(want, expansion.ReplaceAllString(m[1], ""))
	}
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(readme), "<!-- test.sh steps:")
	list, _, ok2 := strings.Cut(list, "<!-- end of test.sh steps -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no list of scripts/test.sh's steps between <!-- test.sh steps: ... --> and <!-- end of test.sh steps -->")
	}
	item := regexp.MustCompile(`(?m)^\d+\. \*\*(.*?)\*\*`)
	var got []string
	for _, m := range item.FindAllStringSubmatch(list, -1) {
		got = append(got, m[1])
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("README.md lists scripts/test.sh's steps as\n  %s\nbut the script's steps are\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestReadmeGraph: the picture of web.yaml the README shows is what
// `svclab graph -f web --format svg` draws today.
func TestReadmeGraph(t *testing.T) {
	want, err := os.ReadFile("../../docs/web.svg")
	if err != nil {
		t.Fatal(err)
	}
	got, err := rootCmd("graph", "-f", "web", "--format", "svg")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("docs/web.svg is not what svclab graph -f web --format svg draws now: regenerate it (go run ./cmd/svclab graph -f web --format svg > docs/web.svg)")
	}
}
