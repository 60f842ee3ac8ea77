package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
)

// The claims of the README and the docs pages that code can check: the
// commands and flags they name exist, the repository paths they name exist,
// their relative links lead to a file and, with an anchor, to one of its
// headings, and the CI steps the README lists are scripts/test.sh's. It runs in
// CI with the Go tests of ./cmd/...

const (
	repoRoot   = "../.."
	readmePath = repoRoot + "/README.md"
)

// docFiles are the guide's pages, as paths from the repository's root:
// README.md and every markdown file under docs/. That includes the summaries
// `svclab bench` generates under docs/bench*/: they are pages the guide links
// to, and their own links (the plots) must lead somewhere too.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d markdown files found (README.md and docs/): is the walk wrong?", len(files))
	}
	return files
}

// docCode is the code of a page (a path from the repository's root): its
// inline code spans and the lines of its fenced blocks, each with its line
// number.
func docCode(t *testing.T, name string) (code []string, lines []int) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, name))
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

// TestReadmeCommandsAndFlags: every `svclab CMD ... --flag` in the code of the
// README and the docs pages names a command svclab has and flags that command
// takes.
func TestReadmeCommandsAndFlags(t *testing.T) {
	root := newRootCommand()
	// What cobra adds when it runs: help, completion, --version.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.InitDefaultVersionFlag()
	invocation := regexp.MustCompile(`(?:^|[\s(|$])svclab((?:\s+[^\s#|;&)]+)*)`)
	checked, inReadme := 0, 0
	for _, name := range docFiles(t) {
		code, lines := docCode(t, name)
		for i, c := range code {
			for _, m := range invocation.FindAllStringSubmatch(c, -1) {
				words := strings.Fields(strings.NewReplacer("[", " ", "]", " ", `\|`, " ").Replace(m[1]))
				checkInvocation(t, root, words, fmt.Sprintf("%s:%d", name, lines[i]))
				checked++
				if name == "README.md" {
					inReadme++
				}
			}
		}
	}
	if checked < 150 || inReadme < 30 {
		t.Errorf("only %d svclab commands found in the README and docs (%d in the README): is the pattern wrong?", checked, inReadme)
	}
}

// checkInvocation checks svclab WORDS, found at where (FILE:LINE): the command
// words name a command, and the flags up to a "--" are its flags.
func checkInvocation(t *testing.T, root *cobra.Command, words []string, where string) {
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
				t.Errorf("%s: svclab %s: no command %q", where, strings.Join(words, " "), w)
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
			t.Errorf("%s: svclab %s: %s takes no flag %s", where, strings.Join(words, " "), cmd.CommandPath(), w)
		}
	}
}

// TestReadmePaths: every path of this repository the README or a docs page
// names exists. Paths are written from the repository's root on every page
// (`topologies/web.yaml`, docs/bench/), so they are looked up there; the
// targets of links, relative to their page (../topologies/web.yaml in a docs
// page), are TestReadmeAndDocsLinks'.
func TestReadmePaths(t *testing.T) {
	top, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range top {
		if e.IsDir() && e.Name() != ".git" {
			dirs = append(dirs, regexp.QuoteMeta(e.Name()))
		}
	}
	// A link's target is relative to its page (vm/summary.md in
	// docs/bench/summary.md): TestReadmeAndDocsLinks checks those.
	linkTarget := regexp.MustCompile(`\]\([^()\s]*(?:\s+"[^"]*")?\)`)
	path := regexp.MustCompile(`(?:^|[\s(\x60"'])(?:\./)?((?:` + strings.Join(dirs, "|") + `)/[A-Za-z0-9_./-]*|Vagrantfile|go\.mod|go\.sum)`)
	checked, inReadme := 0, 0
	for _, name := range docFiles(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		for n, l := range strings.Split(string(data), "\n") {
			l = linkTarget.ReplaceAllString(l, "]()")
			for _, m := range path.FindAllStringSubmatch(l, -1) {
				p := strings.TrimRight(m[1], ".,:;")
				if strings.Contains(p, "...") {
					p = p[:strings.Index(p, "...")]
				}
				if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
					t.Errorf("%s:%d: %s: %v", name, n+1, m[1], err)
				}
				checked++
				if name == "README.md" {
					inReadme++
				}
			}
		}
	}
	if checked < 100 || inReadme < 20 {
		t.Errorf("only %d paths found in the README and docs (%d in the README): is the pattern wrong?", checked, inReadme)
	}
}

// TestReadmeAndDocsLinks: every relative link of the README and the docs pages,
// [text](target) or [text](target#anchor) (images too), leads to a file or
// directory of the repository, and its anchor (also a bare #anchor into the
// page itself) to a heading of that markdown file, by GitHub's rules.
func TestReadmeAndDocsLinks(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	scheme := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	anchors := map[string]map[string]bool{} // by path from the root
	checked := 0
	for _, name := range docFiles(t) {
		links, lines := docLinks(t, name)
		for i, target := range links {
			where := fmt.Sprintf("%s:%d: link %s", name, lines[i], target)
			if scheme.MatchString(target) {
				continue // a URL: not this repository's to check
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			file, err := url.PathUnescape(file)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			switch {
			case file == "":
				file = name
			case strings.HasPrefix(file, "/"):
				file = filepath.ToSlash(filepath.Clean(strings.TrimPrefix(file, "/")))
			default:
				file = filepath.ToSlash(filepath.Join(filepath.Dir(name), file))
			}
			abs := filepath.Join(root, file)
			if file == ".." || strings.HasPrefix(file, "../") {
				t.Errorf("%s: leads out of the repository", where)
				continue
			}
			st, err := os.Stat(abs)
			if err != nil {
				t.Errorf("%s: no such file or directory %s", where, file)
				continue
			}
			if anchor == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(file, ".md") {
				if st.IsDir() {
					t.Errorf("%s: an anchor into a directory", where)
				}
				continue // #L12 and the like into a source file: GitHub's, not the file's
			}
			if anchors[file] == nil {
				anchors[file] = headingAnchors(t, file)
			}
			if !anchors[file][strings.ToLower(anchor)] {
				t.Errorf("%s: %s has no heading with anchor #%s", where, file, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found in the README and docs: is the pattern wrong?", checked)
	}
}

// docLinks are the targets of a page's markdown links and images, outside
// fenced blocks and code spans, each with its line number.
func docLinks(t *testing.T, name string) (targets []string, lines []int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	span := regexp.MustCompile("`[^`]*`")
	link := regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(<?([^()\s<>]+)>?(?:\s+"[^"]*")?\)`)
	fenced := false
	for n, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		l = span.ReplaceAllString(l, "code")
		for _, m := range link.FindAllStringSubmatch(l, -1) {
			targets, lines = append(targets, m[1]), append(lines, n+1)
		}
	}
	return targets, lines
}

// headingAnchors are the anchors GitHub gives the headings of a markdown file
// (a path from the root): the heading's text with links reduced to their text,
// lowercased, every character but letters, marks, numbers, spaces, '-' and
// '_' (connector punctuation) dropped, spaces turned to '-'; a repeated anchor gets -1, -2, ...
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	link := regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(l)
		if fenced || m == nil {
			continue
		}
		a := githubAnchor(link.ReplaceAllString(m[1], "$1"))
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// githubAnchor is the anchor GitHub makes of a heading's text.
func githubAnchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestReadmeGithubAnchor: the anchor rules the link test relies on, on
// headings of this repository's pages.
func TestReadmeGithubAnchor(t *testing.T) {
	for text, want := range map[string]string{
		"The real Kubernetes components":                                 "the-real-kubernetes-components",
		"How fast a lab comes up (up to 100 nodes of 100 pods)":          "how-fast-a-lab-comes-up-up-to-100-nodes-of-100-pods",
		"Benchmarks: what a Service change costs, iptables against IPVS": "benchmarks-what-a-service-change-costs-iptables-against-ipvs",
		"`svclab bench --quick` and `kube_proxy`":                        "svclab-bench---quick-and-kube_proxy",
		"svclab's design, briefly":                                       "svclabs-design-briefly",
	} {
		if got := githubAnchor(text); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", text, got, want)
		}
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
