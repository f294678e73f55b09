package main

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/dledger-go/dledger/dledger/sim"
)

// undocumentedBrokenModes returns the --broken modes that help (dledger sim -h) or readme (the
// --broken table in docs/internals.md) does not list. gone-on-cut was once in the flag's list but missing
// from both tables.
func undocumentedBrokenModes(help, readme string) []string {
	var missing []string
	for _, b := range sim.BrokenModes() {
		inHelp := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(string(b)) + `\s+\S`).MatchString(help)
		inReadme := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(string(b)) + "` \\|").MatchString(readme)
		if !inHelp || !inReadme {
			missing = append(missing, string(b))
		}
	}
	return missing
}

func TestEveryBrokenModeIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../docs/internals.md")
	if err != nil {
		t.Fatal(err)
	}
	if missing := undocumentedBrokenModes(simUsage, string(readme)); len(missing) > 0 {
		t.Errorf("--broken modes missing from dledger sim -h's table or docs/internals.md's --broken table: %v", missing)
	}
	// The check can fail: a help text without one mode's line is caught.
	doctored := regexp.MustCompile(`(?m)^\s+gone-on-cut .*$`).ReplaceAllString(simUsage, "")
	if got := undocumentedBrokenModes(doctored, string(readme)); !slices.Contains(got, "gone-on-cut") {
		t.Errorf("a help text without gone-on-cut: missing = %v, want gone-on-cut among them", got)
	}
}
