package metrics

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// ModulePath is this module's path: the binary's main module when it is cmd/dledger, a
// dependency when a broker embeds the member.
const ModulePath = "github.com/dledger-go/dledger"

// Build describes the dledger code in the running binary, from runtime/debug.ReadBuildInfo.
type Build struct {
	// Version is the dledger module's version: a tag (v1.2.3), a pseudo-version, or "(devel)"
	// for a build from a work tree that Go could not stamp; "unknown" without build info.
	Version string
	// Revision is the VCS commit, "" if unknown: stamped by go build in a git work tree (not
	// with -buildvcs=false), or taken from a pseudo-version when dledger is a dependency.
	Revision string
	// Dirty: built from a work tree with uncommitted changes (vcs.modified).
	Dirty bool
	// Time is the commit time (vcs.time, RFC 3339), "" if unknown.
	Time string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// ReadBuild reads the running binary's build information.
func ReadBuild() Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{Version: "unknown", GoVersion: runtime.Version()}
	}
	return buildFrom(bi)
}

// buildFrom finds the dledger module in bi. The vcs.* settings describe the main module only,
// so an embedding broker's commit is never reported as dledger's.
func buildFrom(bi *debug.BuildInfo) Build {
	b := Build{Version: "unknown", GoVersion: bi.GoVersion}
	if b.GoVersion == "" {
		b.GoVersion = runtime.Version()
	}
	if bi.Main.Path == ModulePath {
		b.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Dirty = s.Value == "true"
			case "vcs.time":
				b.Time = s.Value
			}
		}
	} else {
		for _, d := range bi.Deps {
			if d.Path != ModulePath {
				continue
			}
			b.Version = d.Version
			if d.Replace != nil { // a replace by a local directory has no version
				b.Version = d.Replace.Version
			}
			break
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	if b.Revision == "" {
		b.Revision = pseudoVersionRevision(b.Version)
	}
	return b
}

// pseudoVersionRevision returns the commit a pseudo-version names
// (v0.0.0-20250101120000-0123456789ab, v1.2.4-0.20250101120000-0123456789ab, possibly with a
// +dirty or +incompatible suffix), or "" for any other version.
func pseudoVersionRevision(v string) string {
	v, _, _ = strings.Cut(v, "+")
	i := strings.LastIndexByte(v, '-')
	if i < 15 {
		return ""
	}
	rev, stamp := v[i+1:], v[i-14:i]
	if len(rev) != 12 || strings.Trim(rev, "0123456789abcdef") != "" || strings.Trim(stamp, "0123456789") != "" {
		return ""
	}
	return rev
}
