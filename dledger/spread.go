package dledger

import "hash/fnv"

// The start-up order spread over hosts (issue 29). On hosts that carry many groups with the
// same members (every host a member of every group, in the same peers order), the start-up
// order of configuration (startupRank) makes each group's first peer its first candidate: the
// same host for every group. That host then runs every campaign of a cold start at once and
// leads every group afterwards, and its balancer hands two thirds of them away, a transfer
// (and a term) each. With Options.SpreadStartup the order among the members that are not
// preferred leaders is rotated by a hash of the group's name, which every member of the
// group computes alike: the order stays a permutation the members agree on (one first
// candidate per group, as before), but the first candidates, and so the first leaders, are
// spread evenly over the hosts. Preferred leaders keep the first places. Only when to
// campaign first changes; who may win does not (docs/protocol.md 7.11, 12).

// spreadRank rotates rank, a member's place among the n members of its group that are not
// preferred leaders (0 first), by the group's hash; without SpreadStartup it is rank.
func (e *Elector) spreadRank(rank, n int) int {
	if !e.spread || n < 2 {
		return rank
	}
	h := fnv.New32a()
	h.Write([]byte(e.ms.Group()))
	rot := int(h.Sum32() % uint32(n))
	return (rank - rot + n) % n
}
