package main

import (
	"fmt"
	"strings"
)

// idFromPodName is --id-from-pod-name: the member id of a StatefulSet pod. Kubernetes names a
// StatefulSet's pods <statefulset>-<ordinal> (dledger-0, dledger-1, ...), but a member id may
// not contain '-' (it ends the id in the peers string "n0-host:port"), so the pod name cannot
// be the id itself: the id is "n" and the ordinal (dledger-2: n2), the ids of the peers
// string "n0-dledger-0.dledger...:20911;n1-...". A name that does not end in -<ordinal> is
// refused rather than guessed at: two members must never derive the same id.
func idFromPodName(name string) (string, error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return "", fmt.Errorf("%q is not a StatefulSet pod name <statefulset>-<ordinal> (dledger-2 gives member id n2)", name)
	}
	ord := name[i+1:]
	if strings.Trim(ord, "0123456789") != "" {
		return "", fmt.Errorf("%q does not end in -<ordinal>: %q is not a number (dledger-2 gives member id n2)", name, ord)
	}
	// Kubernetes writes ordinals without leading zeros; refusing dledger-02 keeps the mapping
	// one to one (dledger-2 and dledger-02 would both be n2).
	if len(ord) > 1 && ord[0] == '0' {
		return "", fmt.Errorf("%q: ordinal %q has a leading zero; a StatefulSet names its pods without one", name, ord)
	}
	if len(ord) > 9 { // Kubernetes ordinals are int32; also keeps the id well inside 64 bytes
		return "", fmt.Errorf("%q: ordinal %q is too large", name, ord)
	}
	return "n" + ord, nil
}
