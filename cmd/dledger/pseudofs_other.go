//go:build !linux

package main

// kernelFSOf: only Linux's virtual filesystems are known; elsewhere the start reports what fails.
func kernelFSOf(path string) string { return "" }
