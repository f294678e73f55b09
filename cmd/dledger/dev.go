package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server"
)

// runDev runs a whole group on loopback in one process: the quickest way to watch an election.
func runDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	members := fs.Int("members", 3, "group size (1 to 7)")
	basePort := fs.Int("base-port", 20911, "rpc port of n0; n1 uses the next one, and so on")
	httpBase := fs.Int("http-base-port", 0, "HTTP admin port of n0, the others follow (default: --base-port + 1000)")
	dir := fs.String("data-dir", "", "keep member data here (default: a temp dir, removed on exit)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (role changes are always printed)")
	timing := addTimingFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	// As for server: exit status 2 for a bad command line (found before anything is created),
	// 1 for a failure while running.
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "dledger dev: "+format+"\n", a...)
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "dledger dev: "+format+"\n", a...)
		return 1
	}
	if *members < 1 || *members > 7 {
		return usage("--members must be 1..7")
	}
	if *httpBase == 0 {
		*httpBase = *basePort + 1000
		if *basePort >= 1 && *httpBase+*members-1 > 65535 {
			return usage("--base-port %d leaves no room for %d HTTP ports at +1000: set --http-base-port", *basePort, *members)
		}
	}
	if *basePort < 1 || *basePort+*members-1 > 65535 {
		return usage("--base-port %d leaves no room for %d rpc ports", *basePort, *members)
	}
	if *httpBase < 1 || *httpBase+*members-1 > 65535 {
		return usage("--http-base-port %d leaves no room for %d HTTP ports", *httpBase, *members)
	}
	if *httpBase < *basePort+*members && *basePort < *httpBase+*members {
		return usage("--base-port %d and --http-base-port %d overlap for %d members", *basePort, *httpBase, *members)
	}
	cfg, err := timing.resolve()
	if err != nil {
		return usage("%v", err)
	}
	log, err := newLoggerTo(*logLevel, "console", stderr)
	if err != nil {
		return usage("%v", err)
	}
	defer log.Sync()
	var parts []string
	for i := 0; i < *members; i++ {
		parts = append(parts, fmt.Sprintf("n%d-127.0.0.1:%d", i, *basePort+i))
	}
	peers := strings.Join(parts, ";")
	// Every member shares the timings and peers, so checking one config checks them all (a
	// preferred leader outside the group, say). The key is not known yet (it is written into
	// the data dir, which a bad command line must not create): Insecure stands in for it here.
	if err := (server.Config{Group: "dev", SelfID: "n0", Peers: peers, Ledger: server.LedgerNone, Election: cfg,
		Insecure: true}).Validate(); err != nil {
		return usage("%v", err)
	}
	root := *dir
	if root == "" {
		if root, err = os.MkdirTemp("", "dledger-dev-"); err != nil {
			return fail("%v", err)
		}
		defer os.RemoveAll(root)
	}
	keys, err := devKeys(root)
	if err != nil {
		return fail("%v", err)
	}

	var out sync.Mutex
	printf := func(format string, a ...any) {
		out.Lock()
		fmt.Fprintf(stdout, format, a...)
		out.Unlock()
	}
	start := time.Now()
	// Role changes wait until the member list is printed, so the first screen reads in order.
	// Each listener has its own goroutine: waiting here holds up only the printing.
	listed := make(chan struct{})
	showRoleChanges := sync.OnceFunc(func() { close(listed) })
	var servers []*server.Server
	stopAll := func() {
		for _, s := range servers { // one after another, each with a full deadline
			ctx, cancel := context.WithTimeout(context.Background(), s.StopTimeout())
			s.Stop(ctx)
			cancel()
		}
	}
	printf("dledger dev: group %q with %d members, profile %s, data in %s\n", "dev", *members, timing.profile, root)
	for i := 0; i < *members; i++ {
		id := fmt.Sprintf("n%d", i)
		httpAddr := fmt.Sprintf("127.0.0.1:%d", *httpBase+i)
		s, err := server.New(server.Config{Group: "dev", SelfID: id, Peers: peers,
			DataDir: fmt.Sprintf("%s/%s", root, id), Ledger: server.LedgerNone, Election: cfg,
			Keys: keys},
			server.WithDaemon(server.DaemonConfig{HTTPAddr: httpAddr}),
			server.WithLogger(log),
			server.WithListener(func(ev dledger.RoleEvent) {
				<-listed
				printf("%s\n", devRoleLine(id, start, ev))
			}))
		if err == nil {
			err = s.Start()
		}
		if err != nil {
			showRoleChanges() // before stopping: a stop waits for the listeners to drain
			stopAll()
			return fail("%s: %v", id, err)
		}
		servers = append(servers, s)
		printf("  %s  rpc %s  http http://%s/v1/status\n", id, s.RPCAddr(), s.HTTPAddr())
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.HTTPAddr()
	}
	printf("watch:    dledger status --http %s\n", strings.Join(addrs, ","))
	printf("transfer: dledger transfer --http %s --to n1\n", addrs[0])
	printf("stop with Ctrl-C; role changes follow:\n")
	showRoleChanges()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	return stopOnSignal(sig, log, stderr, "dev", func() error {
		printf("stopping (Ctrl-C again to exit at once)...\n")
		stopAll()
		return nil
	})
}

// devKeys is the dev group's key: root/group.key, written on first use, so the members
// authenticate each other as a real group does and a kept --data-dir keeps its key.
func devKeys(root string) (secure.KeySet, error) {
	path := filepath.Join(root, "group.key")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		key, err := secure.GenerateKey()
		if err != nil {
			return secure.KeySet{}, err
		}
		if err := os.MkdirAll(root, 0o700); err != nil {
			return secure.KeySet{}, err
		}
		if err := secure.WriteKeyFile(path, key); err != nil {
			return secure.KeySet{}, err
		}
	}
	return secure.LoadKeyFile(path)
}

// devRoleLine is the line dledger dev prints for member id's role event ev.
func devRoleLine(id string, start time.Time, ev dledger.RoleEvent) string {
	if ev.Missed > 0 { // the printer fell behind its bounded queue (driver.ListenerQueue)
		return fmt.Sprintf("%8s   %s  missed %d role events", "", id, ev.Missed)
	}
	leader, note := ev.LeaderID, ""
	if leader == "" {
		leader = "-"
	}
	if ev.Role == protocol.UNKNOWN {
		note = " (stopped)" // the server's last event: this member leads nothing now
	}
	return fmt.Sprintf("%8.3fs  %s  %-9s term=%d leader=%s%s", ev.At.Sub(start).Seconds(), id, ev.Role, ev.Term, leader, note)
}
