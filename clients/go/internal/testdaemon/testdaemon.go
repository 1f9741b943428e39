// Package testdaemon starts the real jqjaild for a package's tests: from $JQJAIL_DAEMON, or
// the repository's debug build, on a socket in a temporary directory. It sets
// $JQJAIL_SOCKET, so the tests also go through the clients' socket discovery.
package testdaemon

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Repo is the repository's root.
func Repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

// Main starts the daemon, runs the package's tests, and stops it. A daemon that cannot be
// started fails the tests: it is never skipped.
func Main(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testdaemon:", err)
		code = 1
	}
	os.Exit(code)
}

// Executable is the daemon the tests run: $JQJAIL_DAEMON, or the repository's debug build.
func Executable() string {
	if daemon := os.Getenv("JQJAIL_DAEMON"); daemon != "" {
		return daemon
	}
	return filepath.Join(Repo(), "target", "debug", "jqjaild")
}

func run(m *testing.M) (int, error) {
	daemon := Executable()
	if _, err := os.Stat(daemon); err != nil {
		return 1, fmt.Errorf("no daemon at %s (build it with cargo build, or set JQJAIL_DAEMON): %v", daemon, err)
	}
	dir, err := os.MkdirTemp("", "jqjail-go-test")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "jqjail.sock")
	cmd := exec.Command(daemon, "--socket", socket, "--store", filepath.Join(dir, "store"))
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	deadline := time.Now().Add(20 * time.Second)
	// Ready once a connection is accepted: the socket file exists a moment before the daemon
	// listens on it (bind, then listen), and a connect in between is refused.
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return 1, fmt.Errorf("the daemon did not listen on %s within 20 s", socket)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.Setenv("JQJAIL_SOCKET", socket)
	return m.Run(), nil
}
