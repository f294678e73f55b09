package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/operations.md's metric tables name every metric this package defines, and nothing it
// does not: an operator reads the tables, not the code.
func TestOperationsGuideListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	defined := map[string]bool{}
	for _, names := range [][]string{Names, HookNames, HostNames, MembershipNames} {
		for _, n := range names {
			defined[n] = true
			if !strings.Contains(doc, "`"+n) {
				t.Errorf("docs/operations.md does not list %s", n)
			}
		}
	}
	// Table rows: "| `dledger_...` ...".
	for _, m := range regexp.MustCompile("(?m)^\\| `(dledger_[a-z_]+)").FindAllStringSubmatch(doc, -1) {
		if !defined[m[1]] {
			t.Errorf("docs/operations.md lists %s, which the package does not define", m[1])
		}
	}
}
