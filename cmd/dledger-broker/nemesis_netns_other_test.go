//go:build unix && !linux

package main

import "errors"

// memberNet: network namespaces are Linux only; elsewhere the nemesis skips partitions.
type memberNet struct{ ips []string }

func newMemberNet(int) (*memberNet, error) {
	return nil, errors.New("network namespaces are Linux only")
}
func (m *memberNet) close()                             {}
func (m *memberNet) deaf(a, b int) error                { return nil }
func (m *memberNet) healAll() error                     { return nil }
func (m *memberNet) wrap(i int, argv []string) []string { return argv }
