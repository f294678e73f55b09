package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/metrics"
)

func TestVersionCommand(t *testing.T) {
	var a, b, stderr bytes.Buffer
	if code := run([]string{"version"}, &a, &stderr); code != 0 {
		t.Fatalf("version: exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"--version"}, &b, &stderr); code != 0 {
		t.Fatalf("--version: exit %d: %s", code, stderr.String())
	}
	if a.String() != b.String() {
		t.Fatalf("version and --version differ:\n%s\n%s", a.String(), b.String())
	}
	bi := metrics.ReadBuild()
	for _, want := range []string{"dledger " + bi.Version + "\n", "\ngo: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"} {
		if !strings.Contains(a.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, a.String())
		}
	}
	if code := run([]string{"version", "extra"}, &a, &stderr); code != 2 {
		t.Fatalf("version extra: exit %d", code)
	}
}

func TestWriteVersion(t *testing.T) {
	for _, c := range []struct {
		b    metrics.Build
		want string
	}{
		{metrics.Build{Version: "v1.2.3", Revision: "abc", Time: "2025-01-02T03:04:05Z", GoVersion: "go1.26.8"},
			"dledger v1.2.3\nrevision: abc\ncommit time: 2025-01-02T03:04:05Z\ngo: go1.26.8 "},
		{metrics.Build{Version: "(devel)", Revision: "abc", Dirty: true, GoVersion: "go1.26.8"},
			"dledger (devel)\nrevision: abc (dirty: uncommitted changes)\ngo: go1.26.8 "},
		{metrics.Build{Version: "(devel)", GoVersion: "go1.26.8"},
			"dledger (devel)\nrevision: unknown (built without VCS information)\ngo: go1.26.8 "},
	} {
		var buf bytes.Buffer
		writeVersion(&buf, c.b)
		if !strings.HasPrefix(buf.String(), c.want) {
			t.Errorf("%+v:\n%s\nwant prefix\n%s", c.b, buf.String(), c.want)
		}
	}
}

// A binary built in this git work tree reports the commit, dirty flag and module version that
// go build stamped into it, as `go version -m` reads them.
func TestVersionOfABinaryBuiltWithVCS(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: go build cannot stamp a revision")
	}
	if out, err := exec.Command("git", "rev-parse", "--is-inside-work-tree").Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Skip("not in a git work tree")
	}
	// go build finds a git checkout by a .git directory only (cmd/go's vcs root names): in a
	// linked work tree (git worktree add), whose .git is a file, it stamps nothing, whatever
	// -buildvcs says. A clone, as CI's, has the directory.
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a linked git work tree (.git is not a directory): go build stamps no revision here")
	}
	bin := filepath.Join(t.TempDir(), "dledger")
	// The command line's -buildvcs wins over a GOFLAGS=-buildvcs=false in the environment.
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	setting := func(key string) string {
		m := regexp.MustCompile(`(?m)^\s+build\s+` + regexp.QuoteMeta(key) + `=(\S*)$`).FindSubmatch(meta)
		if m == nil {
			return ""
		}
		return string(m[1])
	}
	mod := regexp.MustCompile(`(?m)^\s+mod\s+` + regexp.QuoteMeta(metrics.ModulePath) + `\s+(\S+)`).FindSubmatch(meta)
	rev := setting("vcs.revision")
	if mod == nil || len(rev) != 40 {
		t.Fatalf("go version -m shows no module version or revision:\n%s", meta)
	}
	want := "dledger " + string(mod[1]) + "\nrevision: " + rev
	if setting("vcs.modified") == "true" {
		want += " (dirty: uncommitted changes)"
	}
	want += "\ncommit time: " + setting("vcs.time") + "\n"
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "\ngo: go1.") {
			t.Fatalf("dledger %s:\n%s\nwant it to start with\n%s", arg, out, want)
		}
	}
}
