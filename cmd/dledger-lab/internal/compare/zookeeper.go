package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// zookeeper runs ZooKeeper members (3.8 from Debian's zookeeper package) as plain JVMs, as
// Debian's zkServer.sh does (QuorumPeerMain, no heap flags; JMX left out), and asks each
// through the AdminServer, GET /commands/leader: it names the leader (leader_id), where the
// srvr four-letter word only says "Mode: follower" without naming whom, and it keeps the
// connection alive (about 1.5 ms warm). A member that is electing or syncing answers with an
// error ("not currently serving requests"), so a follower names the new leader once it has
// synced with it and serves clients: ZooKeeper's own "agreed" moment.
type zookeeper struct {
	java      string
	classpath string
	tick      time.Duration
	initLimit int
	syncLimit int

	dir   string
	admin []string
}

// The zoo.cfg that Debian installs (/etc/zookeeper/conf/zoo.cfg) and ZooKeeper's sample.
const (
	zkDefaultTick      = 2000 * time.Millisecond
	zkDefaultInitLimit = 10
	zkDefaultSyncLimit = 5
)

// ZKClassPath is what Debian's packages provide: the server, the servlet API its AdminServer
// (Jetty) needs (libservlet-api-java), and an slf4j binding so the member logs are written
// (libslf4j-java; without one ZooKeeper logs nothing).
const ZKClassPath = "/usr/share/java/zookeeper.jar:/usr/share/java/servlet-api.jar:/usr/share/java/slf4j-simple.jar"

func (z *zookeeper) name() string { return "zookeeper" }

func (z *zookeeper) setting() string {
	return fmt.Sprintf("tickTime=%d initLimit=%d syncLimit=%d (a silent leader is dropped after syncLimit x tickTime = %v)",
		z.tick.Milliseconds(), z.initLimit, z.syncLimit, time.Duration(z.syncLimit)*z.tick)
}

func (z *zookeeper) cycle() time.Duration { return z.tick }

// bound: ten initial syncs (initLimit x tickTime each) + 10 s for JVM starts.
func (z *zookeeper) bound() time.Duration {
	return 10*time.Duration(z.initLimit)*z.tick + 10*time.Second
}

func (z *zookeeper) portsPerMember() int { return 4 } // client, quorum, election, admin

// prepare writes one zoo.cfg per member (they differ in ports and dataDir) and each myid.
func (z *zookeeper) prepare(dir string, ports [][]int) error {
	z.dir, z.admin = dir, nil
	var servers []string
	for i, p := range ports {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, p[1], p[2]))
		z.admin = append(z.admin, loopback(p[3]))
	}
	for i, p := range ports {
		data := filepath.Join(dir, fmt.Sprintf("z%d", i+1))
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", i+1)), 0o644); err != nil {
			return err
		}
		cfg := fmt.Sprintf("tickTime=%d\ninitLimit=%d\nsyncLimit=%d\ndataDir=%s\nclientPort=%d\n"+
			"clientPortAddress=127.0.0.1\nadmin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort=%d\n"+
			"4lw.commands.whitelist=srvr,mntr\n%s\n",
			z.tick.Milliseconds(), z.initLimit, z.syncLimit, data, p[0], p[3], strings.Join(servers, "\n"))
		if err := os.WriteFile(z.cfgPath(i), []byte(cfg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (z *zookeeper) cfgPath(i int) string {
	return filepath.Join(z.dir, fmt.Sprintf("zoo-%d.cfg", i+1))
}

func (z *zookeeper) command(i int) *exec.Cmd {
	return exec.Command(z.java, "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
		"-cp", z.classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", z.cfgPath(i))
}

func (z *zookeeper) probe(ctx context.Context, client *http.Client, i int) (view, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+z.admin[i]+"/commands/leader", nil)
	if err != nil {
		return view{}, err
	}
	body, err := do(client, req)
	if err != nil {
		return view{}, err
	}
	return parseZKLeader(body, strconv.Itoa(i+1))
}

// parseZKLeader reads the AdminServer's answer to the leader command of member myid. While
// the member elects or syncs, error is set and it names no leader.
func parseZKLeader(body []byte, myid string) (view, error) {
	var st struct {
		IsLeader *bool  `json:"is_leader"`
		LeaderID *int64 `json:"leader_id"`
		Error    any    `json:"error"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return view{}, fmt.Errorf("zookeeper leader command: %w", err)
	}
	v := view{self: myid}
	if st.Error != nil || st.IsLeader == nil || st.LeaderID == nil || *st.LeaderID < 1 {
		return v, nil // electing, syncing or not started: no leader
	}
	v.leader, v.isLeader = strconv.FormatInt(*st.LeaderID, 10), *st.IsLeader
	if v.isLeader && v.leader != myid {
		return view{}, fmt.Errorf("zookeeper member %s says it leads but names leader %s", myid, v.leader)
	}
	return v, nil
}
