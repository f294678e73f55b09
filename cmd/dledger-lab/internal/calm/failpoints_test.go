package calm

import "testing"

// TestEveryScenarioHasAFailpoint: each scenario name selects the fault of that name, so a
// scenario added to CalmScenarios without its Failpoint fails here rather than running another
// fault under its name.
func TestEveryScenarioHasAFailpoint(t *testing.T) {
	r := &calmRun{res: &calmResult{}}
	seen := map[string]bool{}
	for _, s := range CalmScenarios {
		fp := r.failpoint(s)
		if fp.Name() != s {
			t.Errorf("scenario %s runs failpoint %s", s, fp.Name())
		}
		if seen[fp.Name()] {
			t.Errorf("failpoint %s serves two scenarios", fp.Name())
		}
		seen[fp.Name()] = true
	}
}
