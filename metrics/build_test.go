package metrics

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}
	dep := func(path, version string, replace *debug.Module) []*debug.Module {
		return []*debug.Module{{Path: "go.uber.org/zap", Version: "v1.28.0"}, {Path: path, Version: version, Replace: replace}}
	}
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want Build
	}{
		{"dledger binary from a dirty work tree", debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: ModulePath, Version: "v0.0.0-20250102030405-0123456789ab+dirty"}, Settings: vcs},
			Build{Version: "v0.0.0-20250102030405-0123456789ab+dirty", Revision: "0123456789abcdef0123456789abcdef01234567",
				Dirty: true, Time: "2025-01-02T03:04:05Z", GoVersion: "go1.26.8"}},
		{"dledger binary built with -buildvcs=false", debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: ModulePath, Version: "(devel)"}},
			Build{Version: "(devel)", GoVersion: "go1.26.8"}},
		{"dledger binary installed at a tag", debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: ModulePath, Version: "v1.2.3"}},
			Build{Version: "v1.2.3", GoVersion: "go1.26.8"}},
		// A broker's own commit is not dledger's.
		{"embedded at a tag", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/broker", Version: "(devel)"},
			Deps: dep(ModulePath, "v1.2.3", nil), Settings: vcs},
			Build{Version: "v1.2.3", GoVersion: "go1.26.8"}},
		{"embedded at a commit", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/broker"},
			Deps: dep(ModulePath, "v1.2.4-0.20250102030405-abcdef012345", nil)},
			Build{Version: "v1.2.4-0.20250102030405-abcdef012345", Revision: "abcdef012345", GoVersion: "go1.26.8"}},
		{"embedded from a local replace", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/broker"},
			Deps: dep(ModulePath, "v1.2.3", &debug.Module{Path: "../dledger"})},
			Build{Version: "(devel)", GoVersion: "go1.26.8"}},
		{"embedded from a replace at a version", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/broker"},
			Deps: dep(ModulePath, "v1.2.3", &debug.Module{Path: "example.com/fork", Version: "v1.2.3-fork.1"})},
			Build{Version: "v1.2.3-fork.1", GoVersion: "go1.26.8"}},
		{"not linked in", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/broker"}},
			Build{Version: "unknown", GoVersion: "go1.26.8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := buildFrom(&c.bi); got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestPseudoVersionRevision(t *testing.T) {
	for v, want := range map[string]string{
		"v0.0.0-20250102030405-0123456789ab":            "0123456789ab",
		"v1.2.4-0.20250102030405-0123456789ab":          "0123456789ab",
		"v1.2.4-rc.1.0.20250102030405-0123456789ab":     "0123456789ab",
		"v0.0.0-20250102030405-0123456789ab+dirty":      "0123456789ab",
		"v2.0.1-0.20250102030405-0123456789ab+incompat": "0123456789ab",
		"v1.2.3":                             "",
		"v1.2.3-rc.1":                        "",
		"(devel)":                            "",
		"v1.0.0-2025-0123456789ab":           "",
		"v0.0.0-20250102030405-0123456789AB": "",
	} {
		if got := pseudoVersionRevision(v); got != want {
			t.Errorf("%s: %q, want %q", v, got, want)
		}
	}
}

// dledger_build_info is 1 with the build in its labels, one series per member on a shared
// registry, and leaves with the member.
func TestBuildInfoGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m0, err := New(reg, "g", "n0", nil)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := New(reg, "g", "n1", nil)
	if err != nil {
		t.Fatalf("a second member on the same registry: %v", err)
	}
	b := ReadBuild()
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	}
	want := func(self string) string {
		return `dledger_build_info{goversion="` + b.GoVersion + `",group="g",revision="` + rev +
			`",self_id="` + self + `",version="` + b.Version + `"} 1`
	}
	expo := `# HELP dledger_build_info Always 1; the labels say which dledger build runs: module version, VCS revision and Go version.
# TYPE dledger_build_info gauge
` + want("n0") + "\n" + want("n1") + "\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expo), "dledger_build_info"); err != nil {
		t.Fatal(err)
	}
	m1.Unregister()
	if n, err := testutil.GatherAndCount(reg, "dledger_build_info"); err != nil || n != 1 {
		t.Fatalf("after one member's Unregister: %d series (%v), want 1", n, err)
	}
	m0.Unregister()
	if b.GoVersion == "" || b.Version == "" {
		t.Fatalf("ReadBuild in a test binary: %+v", b)
	}
}
