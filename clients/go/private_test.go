package jqjail

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// printPrivateSocket: set, the test binary prints PrivateSocket() and exits.
const printPrivateSocket = "JQJAIL_TEST_PRINT_PRIVATE_SOCKET"

const service, planter = 4242, 65534

func asService(t *testing.T, env []string, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: service, Gid: service}}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v: %s", name, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// The private daemon's socket, found where the jqjail command line puts its daemon (issue 34,
// attack 10): a service account with no runtime dir and no home it may write in, whose
// $TMPDIR/jqjail-UID another user planted, gets a directory of its own from the command line,
// and this client finds the same one; with a home it may write in, both use its cache dir.
func TestThePrivateSocketIsWhereTheCLIPutsItsDaemon(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to act as a service account and as the user who planted its directory")
	}
	daemon := os.Getenv("JQJAIL_DAEMON")
	if daemon == "" {
		daemon = filepath.Join("..", "..", "target", "debug", "jqjaild")
	}
	cli, err := filepath.Abs(filepath.Join(filepath.Dir(daemon), "jqjail"))
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir(): its parent is closed to other users.
	tmp, err := os.MkdirTemp("", "jqjail-go-private-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(tmp, 0o1777))
	// The test binary, where the service account may run it.
	self, err := os.Executable()
	must(err)
	bin := filepath.Join(tmp, "client.test")
	copyFile(t, self, bin)
	planted := filepath.Join(tmp, "jqjail-4242")
	must(os.Mkdir(planted, 0o755))
	must(os.Chown(planted, planter, planter))
	locked := filepath.Join(tmp, "locked-home")
	must(os.Mkdir(locked, 0o755))
	home := filepath.Join(tmp, "home")
	must(os.Mkdir(home, 0o700))
	must(os.Chown(home, service, service))
	defer func() {
		kill := exec.Command("/bin/kill", "-KILL", "-1")
		kill.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: service, Gid: service}}
		kill.Run()
	}()
	found := func(env []string) string {
		out, _ := asService(t, append(env, printPrivateSocket+"=1"), bin)
		return strings.TrimSpace(out)
	}
	env := []string{"HOME=" + locked, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
	_, stderr := asService(t, env, cli, "-n", "1")
	made := regexp.MustCompile(`using (\S+) instead`).FindStringSubmatch(stderr)
	if made == nil || !strings.HasPrefix(made[1], tmp+"/jqjail-4242-") {
		t.Fatalf("the command line made no directory of its own: %s", stderr)
	}
	if got, want := found(env), filepath.Join(made[1], "jqjail.sock"); got != want {
		t.Fatalf("found %s, the command line's daemon is at %s", got, want)
	}
	env = []string{"HOME=" + home, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
	asService(t, env, cli, "-n", "2")
	want := filepath.Join(home, ".cache", "jqjail", "jqjail.sock")
	if _, err := os.Stat(want); err != nil {
		t.Fatal(err)
	}
	if got := found(env); got != want {
		t.Fatalf("found %s, the command line's daemon is at %s", got, want)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
}
