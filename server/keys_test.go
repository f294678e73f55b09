package server

import "github.com/dledger-go/dledger/rpc/secure"

// testKeys is the group key of the tests' members: peer authentication is on, as in
// production.
var testKeys = func() secure.KeySet {
	k, err := secure.GenerateKey()
	if err != nil {
		panic(err)
	}
	ks, err := secure.NewKeySet(k)
	if err != nil {
		panic(err)
	}
	return ks
}()
