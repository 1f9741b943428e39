package jqjail

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"jqjail.dev/jqjail/internal/testdaemon"
)

// dialAndRun: set, the test binary dials with the default discovery, prints `.a` of
// {"a": N} for N its value, and exits (run by the tests below as a fresh program).
const dialAndRun = "JQJAIL_TEST_DIAL_AND_RUN"

func dialAndRunMain(n string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Dial(ctx, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(8)
	}
	r, err := c.Run(ctx, ".a", []byte(`{"a":`+n+`}`), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(r.Output))
	os.Exit(0)
}

// daemonsNaming are the pids of running jqjaild processes whose command line names needle.
func daemonsNaming(needle string) []int {
	var found []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(cmdline), "\x00")
		if filepath.Base(argv[0]) == DaemonExecutable && strings.Contains(string(cmdline), needle) {
			found = append(found, pid)
		}
	}
	return found
}

func privateRuntime(t *testing.T) string {
	t.Helper()
	if exists(SystemSocket) {
		t.Skip("a system jqjail daemon is installed here; Dial would use it")
	}
	runtime := t.TempDir()
	t.Cleanup(func() {
		for _, pid := range daemonsNaming(runtime) {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	})
	return runtime
}

func programEnv(runtime string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, SocketEnv+"=") && !strings.HasPrefix(kv, DaemonEnv+"=") &&
			!strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			env = append(env, kv)
		}
	}
	return append(env, append([]string{"XDG_RUNTIME_DIR=" + runtime, "PATH=/usr/bin:/bin"}, extra...)...)
}

// Issue 36: Dial starts the user's private daemon when none answers, as the command line does,
// and programs racing to start it (jqjaild on $PATH) get one.
func TestDialStartsOnePrivateDaemonForRacingPrograms(t *testing.T) {
	runtime := privateRuntime(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := filepath.Abs(testdaemon.Executable())
	if err != nil {
		t.Fatal(err)
	}
	// jqjaild on $PATH, as a Go program's user installs it (the .deb, or a copy).
	bin := t.TempDir()
	if err := os.Symlink(daemon, filepath.Join(bin, DaemonExecutable)); err != nil {
		t.Fatal(err)
	}
	cmds := make([]*exec.Cmd, 8)
	outs := make([]*strings.Builder, 8)
	for i := range cmds {
		cmds[i] = exec.Command(self)
		cmds[i].Env = append(programEnv(runtime, dialAndRun+"="+fmt.Sprint(i)), "PATH="+bin+":/usr/bin:/bin")
		outs[i] = &strings.Builder{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil || outs[i].String() != fmt.Sprintf("%d\n", i) {
			t.Fatalf("program %d: %v: %q", i, err, outs[i].String())
		}
	}
	if pids := daemonsNaming(runtime); len(pids) != 1 {
		t.Fatalf("%d daemons serve %s: %v", len(pids), runtime, pids)
	}
}

func TestDialWithNoDaemonToStartSaysWhereItLooked(t *testing.T) {
	runtime := privateRuntime(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = programEnv(runtime, dialAndRun+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "jqjaild is neither beside") ||
		!strings.Contains(string(out), "nor named by $JQJAIL_DAEMON") {
		t.Fatalf("%v: %s", err, out)
	}
}

func TestADaemonOfAnotherVersionIsNamedWithWhatToDo(t *testing.T) {
	runtime := privateRuntime(t)
	dir := filepath.Join(runtime, "jqjail")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "jqjail.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.Read(make([]byte, 4096))
		body := []byte(`{"error":{"code":"UNSUPPORTED_VERSION","message":"client speaks protocol 2, this server speaks 3 to 3"}}`)
		prefix := []byte{byte(len(body)), byte(len(body) >> 8), 0, 0}
		conn.Write(append(prefix, body...))
	}()
	t.Setenv(SocketEnv, "")
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, "")
	pid := fmt.Sprint(os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "(pid "+pid) ||
		!strings.Contains(err.Error(), "`kill "+pid+"`") || !strings.Contains(err.Error(), "another version") {
		t.Fatalf("%v", err)
	}
}
