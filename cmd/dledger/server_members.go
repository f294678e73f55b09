package main

import "flag"

// The server command's membership flags (issue 31): --join starts a member that an operator
// is adding to a running group (dledger members add), whose --peers name itself and the
// members it can reach; it learns the rest from the leader.
type membershipFlags struct {
	join *bool
}

func addMembershipFlags(fs *flag.FlagSet) *membershipFlags {
	return &membershipFlags{
		join: fs.Bool("join", false, "this member is being added to a running group (dledger members add --id ID --addr ADDR "+
			"on any member): --peers names it and the members it can reach, and it learns the rest from the leader; "+
			"it votes in no quorum until promoted (dledger members promote). Ignored once its data dir holds a configuration"),
	}
}
