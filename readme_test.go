package relock_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// readmeBlock is a ```go block of README.md.
type readmeBlock struct {
	line int    // README line of the block's first line of code
	src  string // the code, as written
}

// readmeGoBlocks returns the ```go blocks of the README at path.
func readmeGoBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks []readmeBlock
		cur    *readmeBlock
		body   strings.Builder
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &readmeBlock{line: n + 1}
			body.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.src = body.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("README.md:%d: a ```go block is never closed", cur.line-1)
	}
	return blocks
}

// TestREADMEGoBlocks builds every ```go block of README.md against this
// tree, so that what the README shows compiles as written, and checks that
// each is gofmt-formatted. A block is a Go file; one without a package
// clause (a fragment with its imports) is built as package readme. A
// failure names the README line it is about.
func TestREADMEGoBlocks(t *testing.T) {
	blocks := readmeGoBlocks(t, "README.md")
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}

	// The blocks are built as packages inside this module, in a directory
	// whose name starts with "_" so that ./... never matches it: they see
	// the module's own requirements and module cache, and no network.
	root, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })

	// offset[dir] maps a file line back to README: README line = file line + offset.
	offset := map[string]int{}
	var pkgs []string
	for i, b := range blocks {
		src, added := b.src, 0
		if !regexp.MustCompile(`(?m)^package \w+`).MatchString(src) {
			src, added = "package readme\n\n"+src, 2
		}
		if formatted, err := format.Source([]byte(src)); err != nil {
			t.Errorf("README.md:%d: the block does not parse: %v", b.line, err)
			continue
		} else if !bytes.Equal(formatted, []byte(src)) {
			t.Errorf("README.md:%d: the block is not gofmt-formatted; gofmt makes it\n%s", b.line, formatted)
		}
		dir := filepath.Join(root, "block"+strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "readme.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		offset[filepath.ToSlash(dir)] = b.line - 1 - added
		pkgs = append(pkgs, "./"+filepath.ToSlash(dir))
	}
	if len(pkgs) == 0 {
		return
	}

	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		gobin = p
	}
	cmd := exec.Command(gobin, append([]string{"build", "-o", os.DevNull}, pkgs...)...)
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	// Rewrite "_readmeN/blockI/readme.go:L:C: msg" as "README.md:L': msg".
	pos := regexp.MustCompile(`(?m)^(?:\./)?(_readme[^/]*/block\d+)/readme\.go:(\d+)(?::\d+)?:`)
	msg := pos.ReplaceAllStringFunc(string(out), func(m string) string {
		sub := pos.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[2]) // the regexp matched digits
		return fmt.Sprintf("README.md:%d:", n+offset[sub[1]])
	})
	t.Errorf("a ```go block of README.md does not build (%v):\n%s", err, msg)
}
