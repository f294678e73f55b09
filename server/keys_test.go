package server

import "github.com/dledger-go/dledger/rpc/secure"

// freshKeySet is a key set of one new key.
func freshKeySet() (secure.KeySet, error) {
	k, err := secure.GenerateKey()
	if err != nil {
		return secure.KeySet{}, err
	}
	return secure.NewKeySet(k)
}

// testKeys is the group key of the tests' members: peer authentication is on, as in
// production.
var testKeys = func() secure.KeySet {
	ks, err := freshKeySet()
	if err != nil {
		panic(err)
	}
	return ks
}()
