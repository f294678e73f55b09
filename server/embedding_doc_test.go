package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The embedding guide's snippet (docs/embedding.md) must compile as written: it is the first code an embedder
// copies. The test wraps it in a function whose parameters are the snippet's free names and
// vets it inside this module, importing nothing from the module but package server (one
// import for the common case) (a directory starting with "_" is left out of ./... patterns).
func TestEmbeddingGuideSnippetCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package with the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	readme, err := os.ReadFile("../docs/embedding.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Embedding in Go\n\n```go\n"
	_, rest, ok := strings.Cut(string(readme), heading)
	if !ok {
		t.Fatal("docs/embedding.md has no Go block right under \"## Embedding in Go\"")
	}
	snippet, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("the embedding snippet's block is not closed")
	}
	src := `package readmecheck

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/server"
)

type storageBroker interface {
	LeadWithTerm(term int64)
	Fence()
}

var _, _, _ = log.Printf, time.Second, errors.Is

func embed(ctx context.Context, zapLogger *zap.Logger, promRegistry *prometheus.Registry, broker storageBroker,
	lastEntryTerm, lastEntryIndex int64, brokerShutdown <-chan struct{}) error {
` + snippet + "}\n"
	dir, err := os.MkdirTemp("..", "_readmecheck")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "embed.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "vet", "./"+filepath.Base(dir))
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/embedding.md's embedding snippet does not compile:\n%s\n--- as wrapped:\n%s", out, src)
	}
}
