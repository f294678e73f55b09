package main

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every relative link in README.md, BENCHMARKS.md and docs/*.md names a file or directory of
// the repository, and every #anchor a heading of the page it points to (GitHub's rule: lower
// case, punctuation dropped, spaces as hyphens, a repeated heading numbered -1, -2, ...). The
// README was split into docs/ once; a moved section must not leave a dead link behind.

var (
	docLinkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	docHeadingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	docAnchorRE  = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
)

// docSlug is GitHub's anchor for a heading.
func docSlug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docAnchors is every anchor a markdown page defines.
func docAnchors(text string) map[string]bool {
	anchors, seen := map[string]bool{}, map[string]int{}
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
		}
		if inBlock {
			continue
		}
		if m := docHeadingRE.FindStringSubmatch(line); m != nil {
			s := docSlug(m[1])
			if n := seen[s]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range docAnchorRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
	}
	return anchors
}

// docLinkProblems checks the links of pages (path from the repository root -> text); exists
// says whether a repository path exists, read returns a page's text.
func docLinkProblems(pages map[string]string, exists func(string) bool, read func(string) (string, bool)) []string {
	var bad []string
	names := make([]string, 0, len(pages))
	for n := range pages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		inBlock := false
		for i, line := range strings.Split(pages[name], "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inBlock = !inBlock
			}
			if inBlock {
				continue
			}
			for _, m := range docLinkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				at := fmt.Sprintf("%s:%d: link %s", name, i+1, target)
				resolved := name
				if file != "" {
					resolved = path.Clean(path.Join(path.Dir(name), file))
					if strings.HasPrefix(resolved, "../") || !exists(resolved) {
						bad = append(bad, at+": no such file in the repository")
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					bad = append(bad, at+": an anchor into a file that is not markdown")
					continue
				}
				text, ok := read(resolved)
				if !ok || !docAnchors(text)[anchor] {
					bad = append(bad, at+": "+resolved+" has no heading with anchor #"+anchor)
				}
			}
		}
	}
	return bad
}

func TestDocLinksResolve(t *testing.T) {
	pages := docFiles(t)
	b, err := os.ReadFile("../../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	pages["BENCHMARKS.md"] = string(b)
	exists := func(p string) bool { _, err := os.Stat("../../" + p); return err == nil }
	read := func(p string) (string, bool) {
		if s, ok := pages[p]; ok {
			return s, true
		}
		b, err := os.ReadFile("../../" + p)
		return string(b), err == nil
	}
	if bad := docLinkProblems(pages, exists, read); len(bad) > 0 {
		t.Errorf("%d dead links:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	// The check can fail: a link to a moved section, a missing file and a missing anchor.
	planted := map[string]string{
		"README.md": "[a](#metrics) [b](docs/operation.md) [c](docs/operations.md#no-such-heading) [d](docs/operations.md#metrics)",
	}
	readPlanted := func(p string) (string, bool) {
		if p == "README.md" {
			return planted[p], true
		}
		return read(p)
	}
	got := docLinkProblems(planted, exists, readPlanted)
	if len(got) != 3 || !strings.Contains(got[0], "#metrics") || !strings.Contains(got[1], "no such file") || !strings.Contains(got[2], "#no-such-heading") {
		t.Errorf("planted dead links: got %q, want the first three links refused", got)
	}
}
