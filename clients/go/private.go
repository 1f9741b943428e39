package jqjail

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// DaemonExecutable is the daemon's program, which Dial starts as the user's private daemon.
	DaemonExecutable = "jqjaild"
	// DaemonEnv names the daemon's program, the last place looked (after the directory of
	// the running program and $PATH).
	DaemonEnv = "JQJAIL_DAEMON"
	// privateIdleExit is how long a private daemon lives without clients (the CLI's figure).
	privateIdleExit = 10 * time.Minute
	// privateStartTimeout bounds the wait for a started daemon to accept: longer than a
	// daemon waits (15 s) for the store's previous owner, an idle daemon still exiting.
	privateStartTimeout = 20 * time.Second
)

// daemonExecutable is jqjaild beside the running program, else the first on $PATH, else the
// file $JQJAIL_DAEMON names.
func daemonExecutable() (string, error) {
	var beside string
	if self, err := os.Executable(); err == nil {
		beside = filepath.Join(filepath.Dir(self), DaemonExecutable)
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
			return beside, nil
		}
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		// Absolute entries only: an empty or relative one would mean the current directory.
		if !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, DaemonExecutable)
		if st, err := os.Stat(candidate); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	if named := os.Getenv(DaemonEnv); named != "" {
		return named, nil
	}
	return "", fmt.Errorf("%s is neither beside %s nor on $PATH, nor named by $%s "+
		"(install jqjail's .deb, wheel or npm package, or build it with `cargo build --release`)",
		DaemonExecutable, beside, DaemonEnv)
}

// startPrivate starts the user's private daemon for socket unless one accepts there, and
// waits until it does. One starter at a time (flock on start.lock in its directory); a
// daemon never replaces one that serves, so starters without the lock still get one daemon.
func startPrivate(ctx context.Context, socket string) error {
	dir := filepath.Dir(socket)
	uid := os.Getuid()
	if !usable(dir, uid) {
		// Another user's, or open to others: the user's own in the temp dir instead, made
		// with mkdtemp if need be, as the command line picks it.
		prefix := fmt.Sprintf("jqjail-%d-", uid)
		found, ok := ownTempDir(tempDir(), uid)
		if !ok {
			made, err := os.MkdirTemp(tempDir(), prefix)
			if err != nil {
				return unavailable("making a private directory: %v", err)
			}
			// Two starters that made one each both take the first by name.
			found = made
			if first, ok := ownTempDir(tempDir(), uid); ok && first != made {
				os.Remove(made)
				found = first
			}
		}
		dir, socket = found, filepath.Join(found, filepath.Base(socket))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return unavailable("creating %s: %v", dir, err)
	}
	if !exists(dir) || !usable(dir, uid) {
		return unavailable("refusing the private daemon's directory %s: it must be a directory of uid %d's own, "+
			"not a link, closed to others (`chmod 700` it, or remove it)", dir, uid)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "start.lock"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return unavailable("opening the start lock: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return unavailable("locking the start lock: %v", err)
	}
	if accepts(socket) {
		return nil
	}
	exe, err := daemonExecutable()
	if err != nil {
		return unavailable("cannot start a private daemon: %v", err)
	}
	logPath := filepath.Join(dir, "daemon.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return unavailable("opening %s: %v", logPath, err)
	}
	defer log.Close()
	cmd := exec.Command(exe, "--socket", socket, "--store", filepath.Join(dir, "store"),
		"--idle-exit-ms", strconv.FormatInt(privateIdleExit.Milliseconds(), 10))
	cmd.Stderr = log
	// Not the caller's directory, nor its service manager's variables.
	cmd.Dir = "/"
	for _, kv := range os.Environ() {
		if !serviceManagerVar(kv) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Its own session: the terminal's Ctrl-C for this program does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return unavailable("starting the private daemon %s: %v", exe, err)
	}
	exited := make(chan error, 1)
	// Reaped when it exits (its idle exit), so a long-lived program keeps no zombie.
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(privateStartTimeout)
	for time.Now().Before(deadline) {
		if accepts(socket) {
			return nil
		}
		select {
		case err := <-exited:
			return unavailable("the private daemon %s exited at start (%v); see %s", exe, err, logPath)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the private daemon %s: %w", exe, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Neither left running nor a zombie in a long-lived program.
	cmd.Process.Kill()
	<-exited
	return unavailable("the private daemon %s did not accept connections within %s; see %s",
		exe, privateStartTimeout, logPath)
}

// serviceManagerVar: kv is one a program's own service manager set for it, never for the
// daemon it starts (it would take the program's activation sockets, or notify its manager).
func serviceManagerVar(kv string) bool {
	for _, name := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC"} {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

func accepts(socket string) bool {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// otherVersion is the error for a daemon that refused this client's protocol: which process
// it is, and what to do.
func otherVersion(path string, pid int32, refusal *Error, private bool) *Error {
	exe := ""
	if target, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
		exe = " (" + target + ")"
	}
	todo := "Use a client of the daemon's version, or upgrade the daemon"
	if private {
		todo = fmt.Sprintf("It is your private daemon: stop it (`kill %d`: it finishes what it runs and keeps "+
			"its hides), and the next call starts this version's", pid)
	}
	return unavailable("the daemon at %s (pid %d%s) is another version of jqjaild: %s: %s; this client is jqjail-go/%s. %s",
		path, pid, exe, refusal.Code, refusal.Message, Version, todo)
}
