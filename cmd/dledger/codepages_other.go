//go:build !linux

package main

// dropCodePages is Linux's only (codepages_linux.go).
func dropCodePages() uint64 { return 0 }
