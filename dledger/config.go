package dledger

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"weak"
)

// Config holds the election timings (docs/protocol.md section 6). Names follow DLedger's settings.
type Config struct {
	// HeartBeatInterval is the leader's heartbeat period (heartBeatTimeIntervalMs).
	HeartBeatInterval time.Duration
	// MaxHeartBeatLeak: a follower times out, and a leader without quorum acks steps down,
	// after MaxHeartBeatLeak x HeartBeatInterval.
	MaxHeartBeatLeak int
	// MinVoteInterval and MaxVoteInterval bound the random re-vote delay [min, max).
	MinVoteInterval time.Duration
	MaxVoteInterval time.Duration
	// VoteRoundBase: a vote round waits at most VoteRoundBase + rand(MaxVoteInterval) unless
	// it can decide earlier (DLedger hard-codes 2000 ms).
	VoteRoundBase time.Duration
	// Min/MaxTakeLeadershipVoteInterval: the re-vote delay while taking leadership (transfer).
	MinTakeLeadershipVoteInterval time.Duration
	MaxTakeLeadershipVoteInterval time.Duration
	// MaxLeadershipTransferWaitIndex bounds a transferee's lag (the leader's ledger end index
	// minus the transferee's): the lag must be below it, as in Java DLedger (docs/protocol.md 7.8).
	MaxLeadershipTransferWaitIndex int64
	// LeadershipTransferWaitTimeout bounds the transferee's catch-up wait.
	LeadershipTransferWaitTimeout time.Duration
	// PreferredLeaderIDs: the leader hands over to a live, caught-up preferred member.
	PreferredLeaderIDs []string
	// MaintainInterval is the StateMaintainer period (10 ms in DLedger).
	MaintainInterval time.Duration
}

// ProfileDLedger reproduces Java DLedger's defaults exactly.
const ProfileDLedger = "dledger"

// ProfileLAN is our default, chosen for members on one LAN (see DefaultConfig).
const ProfileLAN = "lan"

// ProfileFast is "lan" with a 75 ms heartbeat and leak 8 (see FastConfig): a silent leader
// is detected in interval + 60 ms instead of 260 ms, for 2-2.5 times an idle member's CPU.
const ProfileFast = "fast"

// Profiles lists the profile names Profile accepts.
func Profiles() []string { return []string{ProfileLAN, ProfileDLedger, ProfileFast} }

// Profile returns the named timing profile.
func Profile(name string) (Config, error) {
	switch name {
	case ProfileDLedger:
		return Config{
			HeartBeatInterval:              2000 * time.Millisecond,
			MaxHeartBeatLeak:               3,
			MinVoteInterval:                300 * time.Millisecond,
			MaxVoteInterval:                1000 * time.Millisecond,
			VoteRoundBase:                  2000 * time.Millisecond,
			MinTakeLeadershipVoteInterval:  30 * time.Millisecond,
			MaxTakeLeadershipVoteInterval:  100 * time.Millisecond,
			MaxLeadershipTransferWaitIndex: 1000,
			LeadershipTransferWaitTimeout:  1000 * time.Millisecond,
			MaintainInterval:               10 * time.Millisecond,
		}, nil
	case ProfileLAN, "":
		return DefaultConfig(), nil
	case ProfileFast:
		return FastConfig(), nil
	}
	return Config{}, fmt.Errorf("unknown profile %q (known: %s)", name, strings.Join(Profiles(), ", "))
}

// DefaultConfig is the "lan" profile. The reasons:
//   - HeartBeatInterval 200 ms with leak 3 gives a 600 ms failure detector: a LAN round trip
//     is well under 1 ms, so this tolerates two lost heartbeats plus a 400 ms stall (a GC pause,
//     a slow fsync on a busy disk) without a needless election, while failing over ten times
//     sooner than DLedger's 6 s detector.
//   - Vote interval [100, 300) ms: the 200 ms spread is hundreds of round trips wide, so two
//     candidates rarely collide twice, and a lost election retries within a third of a second.
//   - VoteRoundBase 300 ms: on a LAN every live member answers in milliseconds; the bound only
//     matters when members are dead, and then a short one lets the next round start sooner.
//   - The take-leadership and transfer settings keep DLedger's values, already LAN-sized.
func DefaultConfig() Config {
	return Config{
		HeartBeatInterval:              200 * time.Millisecond,
		MaxHeartBeatLeak:               3,
		MinVoteInterval:                100 * time.Millisecond,
		MaxVoteInterval:                300 * time.Millisecond,
		VoteRoundBase:                  300 * time.Millisecond,
		MinTakeLeadershipVoteInterval:  30 * time.Millisecond,
		MaxTakeLeadershipVoteInterval:  100 * time.Millisecond,
		MaxLeadershipTransferWaitIndex: 1000,
		LeadershipTransferWaitTimeout:  1000 * time.Millisecond,
		MaintainInterval:               10 * time.Millisecond,
	}
}

// FastConfig is the "fast" profile: "lan" with a heartbeat every 75 ms and MaxHeartBeatLeak 8,
// for an operator who wants a silent leader (SIGSTOP, a hung disk, a paused VM, a black-holed
// link) replaced within about 150 ms and pays for it in idle CPU (docs/protocol.md 6.1, 14.4).
// The reasons:
//   - An adapted follower timeout cannot be shorter than interval + DetectionMargin (60 ms):
//     until then a silent leader looks like the gap before its next heartbeat. 75 + 60 = 135
//     ms leaves about 15 ms for the election within 150 ms; lan's 200 ms interval gives 260.
//   - Leak 8 keeps the detection window at 600 ms (8 x 75), lan's: so the fixed window until a
//     link is measured, the ceiling of every adapted window, the rpc call timeout
//     (max(1 s, DW - interval) = 1 s), the back-offs and the liveness bound are lan's, and
//     the profile tolerates the same round trips (docs/protocol.md 6.2).
//   - Everything else is lan's: the vote rounds and intervals are sized by round trips, not
//     by the heartbeat. The stall threshold becomes 37.5 ms (interval / 2, its own rule), and
//     the check-quorum margin stays 100 ms (QuorumMargin's floor of ten passes).
//   - The cost: 2.7 times the heartbeats, measured at 2.0-2.5 times an idle member's CPU of
//     lan (BENCHMARKS.md, "Pause failover with the fast profile"), which is why it is not the
//     default.
func FastConfig() Config {
	c := DefaultConfig()
	c.HeartBeatInterval = 75 * time.Millisecond
	c.MaxHeartBeatLeak = 8
	return c
}

// DetectionWindow is how long a follower waits without heartbeats: leak x interval.
func (c Config) DetectionWindow() time.Duration {
	return time.Duration(c.MaxHeartBeatLeak) * c.HeartBeatInterval
}

// StallThreshold is how late a due StateMaintainer pass may run before the member counts
// as having stalled (a stopped process, a long pause), and refuses to take leadership for a
// heartbeat interval, since the request may be stale: max(3 x MaintainInterval,
// HeartBeatInterval/2), 100 ms for "lan", 1 s for "dledger". Three passes, because a busy
// machine's ticker skips a pass or two without anything being stale. Half a heartbeat
// interval, because up to that a member has missed no heartbeat it should have had, so the
// leader and term a take-leadership request is checked against are still current; beyond it
// they may be out of date.
func (c Config) StallThreshold() time.Duration {
	return max(3*c.MaintainInterval, c.HeartBeatInterval/2)
}

// MaxVoteRound is the longest a vote round may wait.
func (c Config) MaxVoteRound() time.Duration { return c.VoteRoundBase + c.MaxVoteInterval }

// Validate reports every problem at once, each with the setting's name (D5: the reference
// crashes when min == max vote interval).
func (c Config) Validate() error {
	var errs []string
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Sprintf("%s must be > 0 (got %v)", name, d))
		}
	}
	pos("heartBeatTimeInterval", c.HeartBeatInterval)
	pos("maxVoteInterval", c.MaxVoteInterval)
	pos("voteRoundBase", c.VoteRoundBase)
	pos("maxTakeLeadershipVoteInterval", c.MaxTakeLeadershipVoteInterval)
	pos("leadershipTransferWaitTimeout", c.LeadershipTransferWaitTimeout)
	pos("maintainInterval", c.MaintainInterval)
	if c.MaxHeartBeatLeak < 1 {
		errs = append(errs, fmt.Sprintf("maxHeartBeatLeak must be >= 1 (got %d)", c.MaxHeartBeatLeak))
	}
	// The minimums must be positive too: WithDefaults reads a zero field as "not set", and a
	// zero re-vote delay would let candidates collide again at once anyway.
	if c.MinVoteInterval <= 0 || c.MinVoteInterval >= c.MaxVoteInterval {
		errs = append(errs, fmt.Sprintf("need 0 < minVoteInterval < maxVoteInterval (got %v, %v)", c.MinVoteInterval, c.MaxVoteInterval))
	}
	if c.MinTakeLeadershipVoteInterval <= 0 || c.MinTakeLeadershipVoteInterval >= c.MaxTakeLeadershipVoteInterval {
		errs = append(errs, fmt.Sprintf("need 0 < minTakeLeadershipVoteInterval < maxTakeLeadershipVoteInterval (got %v, %v)",
			c.MinTakeLeadershipVoteInterval, c.MaxTakeLeadershipVoteInterval))
	}
	if c.MaxLeadershipTransferWaitIndex < 1 { // a transferee's lag must be below it: 0 would refuse every transfer
		errs = append(errs, fmt.Sprintf("maxLeadershipTransferWaitIndex must be >= 1 (got %d)", c.MaxLeadershipTransferWaitIndex))
	}
	if c.MaintainInterval > 0 && c.HeartBeatInterval > 0 && c.MaintainInterval > c.HeartBeatInterval {
		errs = append(errs, fmt.Sprintf("maintainInterval %v must not exceed heartBeatTimeInterval %v", c.MaintainInterval, c.HeartBeatInterval))
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return errors.New("invalid config: " + strings.Join(errs, "; "))
}

// WithDefaults returns c with every zero field taken from base (usually a profile), so a
// caller sets only what it wants to change: Config{LeadershipTransferWaitTimeout: 7 * time.Second}
// over the lan profile keeps the profile's other timings. A zero value never means "zero"
// (Validate requires every field to be positive), and a nil PreferredLeaderIDs keeps base's.
func (c Config) WithDefaults(base Config) Config {
	fill := func(v *time.Duration, b time.Duration) {
		if *v == 0 {
			*v = b
		}
	}
	fill(&c.HeartBeatInterval, base.HeartBeatInterval)
	fill(&c.MinVoteInterval, base.MinVoteInterval)
	fill(&c.MaxVoteInterval, base.MaxVoteInterval)
	fill(&c.VoteRoundBase, base.VoteRoundBase)
	fill(&c.MinTakeLeadershipVoteInterval, base.MinTakeLeadershipVoteInterval)
	fill(&c.MaxTakeLeadershipVoteInterval, base.MaxTakeLeadershipVoteInterval)
	fill(&c.LeadershipTransferWaitTimeout, base.LeadershipTransferWaitTimeout)
	fill(&c.MaintainInterval, base.MaintainInterval)
	if c.MaxHeartBeatLeak == 0 {
		c.MaxHeartBeatLeak = base.MaxHeartBeatLeak
	}
	if c.MaxLeadershipTransferWaitIndex == 0 {
		c.MaxLeadershipTransferWaitIndex = base.MaxLeadershipTransferWaitIndex
	}
	if c.PreferredLeaderIDs == nil {
		c.PreferredLeaderIDs = append([]string(nil), base.PreferredLeaderIDs...)
	}
	return c
}

// shared holds the one copy of each Config in use by this process's electors: a host of
// thousands of members, all of the same timings, kept 104 bytes of them in every elector
// (issue 29). Weak pointers: a configuration no elector uses any more is collected, and its
// entry dropped by a later sweep.
var shared struct {
	sync.Mutex
	m       map[string]weak.Pointer[Config]
	sweepAt int // len(m) at which dead entries are swept next
}

// sharedConfig returns the process's copy of cfg: equal configurations, the same pointer.
// Nothing may change a Config it returns.
func sharedConfig(cfg Config) *Config {
	key := fmt.Sprintf("%#v", cfg) // every field, the preferred leaders quoted
	shared.Lock()
	defer shared.Unlock()
	if c := shared.m[key].Value(); c != nil {
		return c
	}
	if shared.m == nil {
		shared.m = map[string]weak.Pointer[Config]{}
	}
	if len(shared.m) >= shared.sweepAt {
		for k, p := range shared.m {
			if p.Value() == nil {
				delete(shared.m, k)
			}
		}
		shared.sweepAt = max(64, 2*len(shared.m))
	}
	c := new(Config)
	*c = cfg
	c.PreferredLeaderIDs = slices.Clone(cfg.PreferredLeaderIDs) // not the caller's array
	shared.m[key] = weak.Make(c)
	return c
}
