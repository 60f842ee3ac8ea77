// Command checksources fails when the repository holds something that is not a
// source: a tracked ELF file (an executable, a test binary, an object) or a
// tracked file larger than 1 MB outside docs/bench/, where the benchmark's raw
// results live. It reads what git tracks (the index), not the working tree.
//
//	go run ./scripts/ci/checksources [REPO]
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

const (
	// maxSize is the largest file allowed outside exemptDir, in bytes.
	maxSize   = 1_000_000
	exemptDir = "docs/bench/"
)

var elfMagic = []byte("\x7fELF")

func main() {
	repo := "."
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: checksources [REPO]")
		os.Exit(2)
	}
	if len(os.Args) == 2 {
		repo = os.Args[1]
	}
	problems, err := check(repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checksources:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "checksources:", p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "checksources: the repository holds sources only: `git rm --cached` the file(s) above and cover them in .gitignore\n")
		os.Exit(1)
	}
}

// blob is one tracked file as the index has it.
type blob struct {
	path, object string
}

// check lists what is tracked in repo and should not be.
func check(repo string) ([]string, error) {
	blobs, err := trackedBlobs(repo)
	if err != nil {
		return nil, err
	}
	// One git cat-file reads every blob; each answer is "OBJECT blob SIZE\n",
	// the content and a newline.
	cmd := exec.Command("git", "-C", repo, "cat-file", "--batch")
	var in bytes.Buffer
	for _, b := range blobs {
		in.WriteString(b.object + "\n")
	}
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	r := bufio.NewReader(out)
	var problems []string
	for _, b := range blobs {
		size, head, err := readBlob(r)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("git cat-file %s (%s): %w", b.object, b.path, err)
		}
		switch {
		case bytes.HasPrefix(head, elfMagic):
			problems = append(problems, fmt.Sprintf("%s: an ELF binary (%s)", b.path, megabytes(size)))
		case size > maxSize && !strings.HasPrefix(b.path, exemptDir):
			problems = append(problems, fmt.Sprintf("%s: %s, over the %s allowed outside %s", b.path, megabytes(size), megabytes(maxSize), exemptDir))
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return problems, nil
}

// trackedBlobs lists the index's regular files and executables; symlinks and
// submodules hold no content of their own.
func trackedBlobs(repo string) ([]blob, error) {
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z", "--stage").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, fmt.Errorf("git ls-files in %s: %w: %s", repo, err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("git ls-files in %s: %w", repo, err)
	}
	var blobs []blob
	for _, entry := range strings.Split(string(out), "\x00") {
		// MODE OBJECT STAGE\tPATH
		meta, path, ok := strings.Cut(entry, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		if f[0] == "100644" || f[0] == "100755" {
			blobs = append(blobs, blob{path: path, object: f[1]})
		}
	}
	return blobs, nil
}

// readBlob reads one answer of git cat-file --batch and returns the blob's size
// and its first bytes.
func readBlob(r *bufio.Reader) (size int64, head []byte, err error) {
	header, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, err
	}
	f := strings.Fields(header)
	if len(f) != 3 || f[1] != "blob" {
		return 0, nil, fmt.Errorf("unexpected answer %q", strings.TrimSpace(header))
	}
	size, err = strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("unexpected answer %q", strings.TrimSpace(header))
	}
	head = make([]byte, min(size, int64(len(elfMagic))))
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, nil, err
	}
	if _, err := r.Discard(int(size) - len(head) + 1); err != nil { // the rest and the newline
		return 0, nil, err
	}
	return size, head, nil
}

func megabytes(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
