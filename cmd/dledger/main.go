// Command dledger runs and inspects DLedger-style replica-group election members.
//
//	dledger server    run one member of a replica group, or a host of many (--config with configs:)
//	dledger keygen    write a group key file (or the files of a key rotation, or a member's key pair)
//	dledger dev       run a whole 3-member group on loopback in one process
//	dledger status    show the members of a group (via their HTTP admin API)
//	dledger groups    list, add and remove the group members of a server process
//	dledger transfer  hand leadership to a member
//	dledger members   list a group's members, add, promote or remove one while it runs
//	dledger watch     print a member's role events as they happen
//	dledger sim       run the deterministic simulator over many seeds
//	dledger bench     measure failover, and hosts of many groups, with real processes
//	dledger version   print the version, VCS commit and Go version
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: dledger <command> [flags]

commands:
  server    run one member of a replica group: dledger server --key-file FILE ...
            (or many on one port: dledger server --config FILE with DLedger's configs: list)
  keygen    write a group key: dledger keygen FILE (rotation: dledger keygen --rotate FILE;
            a member's own key pair: dledger keygen --member --id n0 FILE)
  dev       run a 3-member group on loopback in one process (data in a temp dir)
  status    show every member of a group: dledger status --http ADDR[,ADDR...] [--group G] [-o json]
  groups    list, add or remove a server's group members: dledger groups list|add|remove --http ADDR
  transfer  hand leadership to a member: dledger transfer --http ADDR [--group G] --to n2
  members   a group's configuration and its changes: dledger members list|add|promote|remove --http ADDR
  watch     print a member's role events as they happen: dledger watch --http ADDR [--group G] [-o json]
  sim       run the deterministic simulator: dledger sim --seeds N
  bench     measure with real processes: dledger bench failover|groups ... (lab: dledger-lab)
  version   print the version, VCS commit and Go version (also: dledger --version)

Run 'dledger <command> -h' for the command's flags.
`

func main() {
	quietOnceServing = len(os.Args) > 1 && os.Args[1] == "server"
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	rest := args[1:]
	switch args[0] {
	case "server":
		return runServer(rest, stdout, stderr)
	case "keygen":
		return runKeygen(rest, stdout, stderr)
	case "dev":
		return runDev(rest, stdout, stderr)
	case "status":
		return runStatus(rest, stdout, stderr)
	case "groups":
		return runGroups(rest, stdout, stderr)
	case "transfer":
		return runTransfer(rest, stdout, stderr)
	case "members":
		return runMembers(rest, stdout, stderr)
	case "watch":
		return runWatch(rest, stdout, stderr)
	case "sim":
		return runSim(rest, stdout, stderr)
	case "bench":
		return runBench(rest, stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(rest, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "dledger: unknown command %q\n%s", args[0], usage)
	return 2
}
