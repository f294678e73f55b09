package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dledger-go/dledger/rpc/secure"
)

const keygenUsage = `usage: dledger keygen FILE
       dledger keygen --rotate FILE
       dledger keygen --member [--id ID] FILE

Without --rotate: write a new group key to FILE (mode 600; an existing file is never
overwritten; missing parent directories are created with mode 700). Copy it to every member and start each with --key-file FILE.

With --rotate: FILE is the key file the group uses now (one key). Write a new key into three
files beside it, one per step of a rotation without downtime:
  FILE.step1  the current key first (dials), the new one accepted
  FILE.step2  the new key first, the current one accepted
  FILE.step3  the new key only
Roll out each step to every member, restarting one member at a time (the others keep the
quorum), before starting the next step.

With --member: write a new member key pair's private key to FILE (mode 600, never
overwritten) for --member-key-file, and print its public key as a line of the group's trust
file ("ID PUBLIC-KEY", alone on stdout; --id names the member, default MEMBER-ID). Every member's trust file
lists every member's public key. To replace a member's key without downtime, add the new
public key to its line everywhere (SIGHUP each member), give the member its new key file
(SIGHUP it), then remove the old public key everywhere (SIGHUP each member).

flags:
  -id ID
    	with --member: the member id of the printed trust file line (default MEMBER-ID)
  -member
    	write a member's own key pair instead of a group key
  -rotate
    	write the three files of a group key rotation from the current key file
`

// runKeygen writes a group key file, or the three files of a key rotation.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	path, rotate, member, id, err := keygenArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, keygenUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "dledger keygen: %v\n%s", err, keygenUsage)
		return 2
	}
	if member {
		if rotate {
			fmt.Fprintf(stderr, "dledger keygen: --member and --rotate exclude each other\n%s", keygenUsage)
			return 2
		}
		if err := writeMemberKey(path, id, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "dledger keygen: %v\n", err)
			return 1
		}
		return 0
	}
	key, err := secure.GenerateKey()
	if err == nil {
		write := writeNewKey
		if rotate {
			write = writeRotation
		}
		err = write(path, key, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dledger keygen: %v\n", err)
		return 1
	}
	return 0
}

// keygenArgs is keygen's FILE and --rotate; flag.ErrHelp for -h.
func keygenArgs(args []string) (path string, rotate, member bool, id string, err error) {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.BoolVar(&rotate, "rotate", false, "write the three files of a key rotation from the current key file")
	fs.BoolVar(&member, "member", false, "write a member's own key pair (private key to FILE) and print its trust file line")
	fs.StringVar(&id, "id", "MEMBER-ID", "with --member: the member id the printed trust file line names")
	fs.SetOutput(io.Discard)
	fs.Usage = func() { fmt.Fprint(fs.Output(), keygenUsage) }
	// Flags may come before or after FILE (`keygen --rotate FILE` or `keygen FILE --rotate`):
	// the flag package stops at the first argument that is not a flag, so parse what follows
	// each file name again.
	var files []string
	for rest := args; ; rest = fs.Args()[1:] {
		if err := fs.Parse(rest); err != nil {
			return "", false, false, "", err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
	}
	if len(files) != 1 {
		return "", false, false, "", errors.New("want one FILE")
	}
	return files[0], rotate, member, id, nil
}

// writeMemberKey writes a new member key pair's private key to a new file at path and prints
// the trust file line of its public key, alone on stdout (so `>> trust` appends it), and what
// to do with both on stderr.
func writeMemberKey(path, id string, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	key, err := secure.GenerateStaticKey()
	if err != nil {
		return err
	}
	if err := secure.WriteStaticKeyFile(path, key); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s (public key id %s): start the member with --member-key-file %s; every member's --trust-file needs the line on stdout\n",
		path, key.Public().ID(), path)
	fmt.Fprintf(stdout, "%s %s\n", id, key.Public())
	return nil
}

// writeNewKey writes key, alone, to a new file at path.
func writeNewKey(path string, key [secure.KeySize]byte, stdout io.Writer) error {
	// A fresh checkout has no data/ (it is git-ignored), and the README's walk-through
	// writes data/group.key first: create the missing parents, private as the key itself.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := secure.WriteKeyFile(path, key); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (key id %s): copy it to every member (mode 600) and start each with --key-file %s\n",
		path, secure.KeyID(key), path)
	return nil
}

// writeRotation writes the three step files that replace path's one key with key. It writes
// none when one exists already, and removes those it wrote when one fails.
func writeRotation(path string, key [secure.KeySize]byte, stdout io.Writer) error {
	current, err := secure.LoadKeyFile(path)
	if err != nil {
		return err
	}
	if current.Len() != 1 {
		return fmt.Errorf("%s holds %d keys: finish the rotation in progress first (its last step leaves one key)", path, current.Len())
	}
	old := current.Primary()
	steps := [][][secure.KeySize]byte{{old, key}, {key, old}, {key}}
	for i := range steps {
		if _, err := os.Lstat(stepFile(path, i)); err == nil {
			return fmt.Errorf("%s already exists; not overwriting it", stepFile(path, i))
		}
	}
	for i, keys := range steps {
		if err := secure.WriteKeyFile(stepFile(path, i), keys...); err != nil {
			for j := range i {
				os.Remove(stepFile(path, j))
			}
			return err
		}
	}
	fmt.Fprintf(stdout, `new key id %s replaces %s. Roll out each step to every member, one member at a time
(replace its key file, restart it, wait until it follows the leader), before the next step:
  1. %s  (current key dials, new key accepted)
  2. %s  (new key dials, current key still accepted)
  3. %s  (new key only)
`, secure.KeyID(key), secure.KeyID(old), stepFile(path, 0), stepFile(path, 1), stepFile(path, 2))
	return nil
}

func stepFile(path string, i int) string { return fmt.Sprintf("%s.step%d", path, i+1) }
