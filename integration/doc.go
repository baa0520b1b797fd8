// Package integration holds crewlog's black-box tests: the import rules of
// DESIGN.md, and (with the daemon) tests that build the binaries and drive
// them over a real socket. It has no non-test code.
package integration
