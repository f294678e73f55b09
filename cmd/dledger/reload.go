package main

// reloaders run, in order, on every SIGHUP the server command receives: each re-reads its
// files and swaps them in, or keeps what it had and says why. A failed reload never stops
// the process.
type reloader struct {
	name   string
	reload func() error
}
