package jqjail

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// SystemSocket is where the system service listens.
	SystemSocket = "/run/jqjail/jqjail.sock"
	// SocketEnv names a socket to use instead of the defaults.
	SocketEnv = "JQJAIL_SOCKET"
	// DaemonUIDsEnv lists, comma-separated, uids besides the user's own and root's whose
	// daemon this client trusts.
	DaemonUIDsEnv = "JQJAIL_DAEMON_UIDS"
)

// Client is one connection to the daemon. Its methods may be called from several goroutines;
// they take turns (one request at a time per connection: open more clients for concurrency).
// After a failure to talk to the daemon (an *Error with Code Unavailable, or a cancelled
// context) the connection is closed and every later call fails; dial a new one.
type Client struct {
	mu     sync.Mutex
	conn   *net.UnixConn
	path   string
	limits Limits
	server string
	broken error
}

// Dial connects to the daemon at socket, or, when socket is "", at the first of the places
// every jqjail client looks (PROTOCOL.md, "Finding the socket"): $JQJAIL_SOCKET, the system
// service's socket, the user's private daemon. It checks who serves the socket before it
// sends a byte, then exchanges hellos.
func Dial(ctx context.Context, socket string) (*Client, error) {
	if socket != "" {
		return dial(ctx, socket)
	}
	if env := os.Getenv(SocketEnv); env != "" {
		c, err := dial(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("%w (from $%s)", err, SocketEnv)
		}
		return c, nil
	}
	c, err := dial(ctx, SystemSocket)
	var e *Error
	if err == nil || (errors.As(err, &e) && e.Code != Unavailable) || errors.Is(err, ErrUntrusted) {
		return c, err
	}
	// The user's private daemon, started when nothing accepts at its socket (as the jqjail
	// command line does): jqjaild beside this program, on $PATH, or named by $JQJAIL_DAEMON.
	socket = PrivateSocket()
	conn, err := connectUnix(ctx, socket)
	if err != nil {
		if err := startPrivate(ctx, socket); err != nil {
			return nil, err
		}
		socket = PrivateSocket()
		if conn, err = connectUnix(ctx, socket); err != nil {
			return nil, err
		}
	}
	return handshake(ctx, conn, socket, true)
}

// PrivateSocket is the socket of the user's private daemon (the one the jqjail command line
// starts), found as the command line finds its directory: the first usable of
// $XDG_RUNTIME_DIR/jqjail, $TMPDIR/jqjail-UID and ${XDG_CACHE_HOME:-$HOME/.cache}/jqjail,
// where usable is a directory of the user's own, not a link, closed to others, or nothing yet
// in a directory the user may write in. When none is (a service account with no runtime dir,
// no writable home, and a jqjail-UID another user planted), the command line made
// $TMPDIR/jqjail-UID-XXXXXX instead: the first by name of the user's own is it.
func PrivateSocket() string {
	uid := os.Getuid()
	var candidates []string
	// Absolute paths only: a relative one would be under whatever directory the program runs in.
	if dir := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(dir) {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			candidates = append(candidates, filepath.Join(dir, "jqjail"))
		}
	}
	candidates = append(candidates, filepath.Join(tempDir(), fmt.Sprintf("jqjail-%d", uid)))
	cache := os.Getenv("XDG_CACHE_HOME")
	if !filepath.IsAbs(cache) {
		cache = ""
		if home := os.Getenv("HOME"); filepath.IsAbs(home) {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		candidates = append(candidates, filepath.Join(cache, "jqjail"))
	}
	for _, dir := range candidates {
		if usable(dir, uid) {
			return filepath.Join(dir, "jqjail.sock")
		}
	}
	if dir, ok := ownTempDir(tempDir(), uid); ok {
		return filepath.Join(dir, "jqjail.sock")
	}
	return filepath.Join(candidates[len(candidates)-1], "jqjail.sock")
}

// tempDir is $TMPDIR when it is an absolute path, else /tmp.
func tempDir() string {
	if dir := os.Getenv("TMPDIR"); filepath.IsAbs(dir) {
		return dir
	}
	return "/tmp"
}

// usable: a directory of uid's own (not a link) closed to others, or nothing there yet in a
// directory this process may write in.
func usable(dir string, uid int) bool {
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return canMake(dir)
	}
	if err != nil || !st.IsDir() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == uid && st.Mode().Perm()&0o077 == 0
}

// canMake: the nearest existing ancestor of dir is a directory this process may write in.
func canMake(dir string) bool {
	for parent := filepath.Dir(dir); ; parent = filepath.Dir(parent) {
		if st, err := os.Stat(parent); err == nil {
			return st.IsDir() && syscall.Access(parent, 0o3) == nil // W_OK|X_OK
		}
		if parent == filepath.Dir(parent) {
			return false
		}
	}
}

// ownTempDir: the first by name of temp/jqjail-UID-* that is usable and exists (its owner
// is uid, which no other user can forge).
func ownTempDir(temp string, uid int) (string, bool) {
	entries, err := os.ReadDir(temp) // sorted by name
	if err != nil {
		return "", false
	}
	prefix := fmt.Sprintf("jqjail-%d-", uid)
	for _, e := range entries {
		path := filepath.Join(temp, e.Name())
		if strings.HasPrefix(e.Name(), prefix) && exists(path) && usable(path, uid) {
			return path, true
		}
	}
	return "", false
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func dial(ctx context.Context, path string) (*Client, error) {
	conn, err := connectUnix(ctx, path)
	if err != nil {
		return nil, err
	}
	return handshake(ctx, conn, path, false)
}

func connectUnix(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, unavailable("cannot connect to %s: %v", path, err)
	}
	return raw.(*net.UnixConn), nil
}

// handshake checks who serves conn and exchanges hellos; private says the socket is the
// user's private daemon's (for the advice when it is another version).
func handshake(ctx context.Context, conn *net.UnixConn, path string, private bool) (*Client, error) {
	pid, err := checkPeer(conn, path)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := &Client{conn: conn, path: path}
	hello, _ := encodeJSON(helloRequest("jqjail-go/" + Version))
	c.mu.Lock()
	defer c.mu.Unlock()
	r, _, err := c.roundTrip(ctx, hello, nil, 0, []string{"hello"})
	if err != nil {
		conn.Close()
		return nil, err
	}
	switch r.kind {
	case "hello":
	case "error":
		conn.Close()
		refusal := errorOf(r.fields)
		var e *Error
		if errors.As(refusal, &e) && e.Code == "UNSUPPORTED_VERSION" {
			return nil, otherVersion(path, pid, e, private)
		}
		return nil, refusal
	default:
		conn.Close()
		return nil, unavailable("expected a hello reply from %s, got %s", path, r.kind)
	}
	var reply struct {
		Server string  `json:"server"`
		Limits *Limits `json:"limits"`
	}
	if err := json.Unmarshal(r.fields, &reply); err != nil || reply.Limits == nil {
		conn.Close()
		return nil, unavailable("the hello reply of %s has no usable limits", path)
	}
	c.limits, c.server = *reply.Limits, reply.Server
	return c, nil
}

func helloRequest(client string) any {
	return map[string]any{"hello": map[string]any{"protocol": ProtocolVersion, "client": client}}
}

// TrustedUIDs are the uids whose daemon this client talks to: the user's, root's (systemd's
// socket activation listens as root), and those in $JQJAIL_DAEMON_UIDS.
func TrustedUIDs() ([]uint32, error) {
	uids := []uint32{uint32(os.Getuid()), 0}
	for _, part := range strings.Split(os.Getenv(DaemonUIDsEnv), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		uid, err := strconv.ParseUint(part, 10, 32)
		if err != nil {
			return nil, unavailable("$%s holds %q, which is not a uid", DaemonUIDsEnv, part)
		}
		uids = append(uids, uint32(uid))
	}
	return uids, nil
}

// checkPeer refuses a daemon run by anyone but a trusted uid: a socket in a shared
// directory may be another user's, who would read everything sent to it.
func checkPeer(conn *net.UnixConn, path string) (int32, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, unavailable("cannot inspect %s: %v", path, err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, unavailable("cannot read the peer of %s: %v %v", path, err, credErr)
	}
	trusted, err := TrustedUIDs()
	if err != nil {
		return 0, err
	}
	for _, uid := range trusted {
		if cred.Uid == uid {
			return cred.Pid, nil
		}
	}
	e := unavailable("%s is served by uid %d, which is not trusted (trusted: %v); set $%s if that uid runs your daemon",
		path, cred.Uid, trusted, DaemonUIDsEnv)
	e.untrusted = true
	return 0, e
}

// Limits are the daemon's, from its hello reply.
func (c *Client) Limits() Limits { return c.limits }

// Server is the daemon's name and version.
func (c *Client) Server() string { return c.server }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// deadlineGrace: when the context's deadline passes, the daemon's own answer (a TIMEOUT
// naming the limit) is awaited this much longer before the request is abandoned.
const deadlineGrace = 500 * time.Millisecond

// call sends one request (a frame and its tail) and reads its one answer: the answer's
// fields and tail, or the error it carries. expect names the variants that may answer.
func (c *Client) call(ctx context.Context, request any, tail []byte, expect ...string) (response, []byte, error) {
	body, err := encodeJSON(request)
	if err != nil {
		return response{}, nil, fmt.Errorf("jqjail: encoding the request: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return response{}, nil, c.broken
	}
	bound := c.limits.MaxInputBytes
	if c.limits.MaxOutputBytes > bound {
		bound = c.limits.MaxOutputBytes
	}
	r, answerTail, err := c.roundTrip(ctx, body, tail, bound, expect)
	if err != nil {
		c.broken = err
		c.conn.Close()
		return response{}, nil, err
	}
	if r.kind == "error" {
		err := errorOf(r.fields)
		// The answers after which the daemon closes the connection (PROTOCOL.md, "Errors that
		// close the connection"): this one is not used again.
		if e, ok := err.(*Error); ok && closesConnection(e) {
			c.broken = unavailable("the connection was closed after %v", e)
			c.conn.Close()
		}
		return response{}, nil, err
	}
	return r, answerTail, nil
}

func closesConnection(e *Error) bool {
	switch e.Code {
	case "FRAME_TOO_LARGE", "PROTOCOL_ERROR", "UNSUPPORTED_VERSION", "PERMISSION_DENIED":
		return true
	case "OVERLOADED":
		return strings.HasSuffix(e.Message, "the connection is closed")
	}
	return false
}

// Usable says whether the connection can take another request (false once it failed, was
// abandoned, or was closed by the daemon).
func (c *Client) Usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken == nil
}

// encodeJSON is json.Marshal without HTML escaping (<, > and & stay one byte each, so a
// request is no longer on the wire than it must be).
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// roundTrip writes a frame and its tail and reads one response frame and its tail, within
// ctx: its deadline (plus a grace for the daemon's own answer) bounds the I/O, and its
// cancellation abandons the request. A response that is neither an error nor one of expect
// ends the connection before its tail is read; a tail is read as it arrives, never allocated
// whole in advance. Called with c.mu held.
func (c *Client) roundTrip(ctx context.Context, body, tail []byte, bound uint64, expect []string) (response, []byte, error) {
	if err := ctx.Err(); err != nil {
		return response{}, nil, err
	}
	deadline := time.Time{}
	if d, ok := ctx.Deadline(); ok {
		deadline = d.Add(deadlineGrace)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return response{}, nil, unavailable("setting a deadline: %v", err)
	}
	// The watcher abandons the request when ctx ends; it has exited before roundTrip
	// returns, so it can never touch the deadline of a later request.
	done, exited := make(chan struct{}), make(chan struct{})
	defer func() {
		close(done)
		<-exited
	}()
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				select {
				case <-time.After(deadlineGrace):
				case <-done:
					return
				}
			}
			c.conn.SetDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	fail := func(what string, err error) (response, []byte, error) {
		if ctx.Err() != nil {
			return response{}, nil, fmt.Errorf("jqjail: %s %s: %w", what, c.path, ctx.Err())
		}
		return response{}, nil, unavailable("%s %s: %v", what, c.path, err)
	}
	out := frame(body)
	if len(tail) <= 64<<10 {
		out = append(out, tail...)
		tail = nil
	}
	if _, err := c.conn.Write(out); err != nil {
		return fail("writing to", err)
	}
	if len(tail) > 0 {
		if _, err := c.conn.Write(tail); err != nil {
			return fail("writing to", err)
		}
	}
	var prefix [4]byte
	if _, err := io.ReadFull(c.conn, prefix[:]); err != nil {
		return fail("reading from", err)
	}
	n := binary.LittleEndian.Uint32(prefix[:])
	if n > MaxResponseFrameBytes {
		return response{}, nil, unavailable("the daemon sent a %d-byte frame, over the %d-byte maximum", n, MaxResponseFrameBytes)
	}
	frameBody := make([]byte, n)
	if _, err := io.ReadFull(c.conn, frameBody); err != nil {
		return fail("reading from", err)
	}
	r, err := decodeResponse(frameBody)
	if err != nil {
		return response{}, nil, err
	}
	expected := r.kind == "error"
	for _, k := range expect {
		expected = expected || r.kind == k
	}
	if !expected {
		return response{}, nil, unavailable("the daemon answered %s, expected %s", r.kind, strings.Join(expect, " or "))
	}
	if bound > maxTailBytes {
		bound = maxTailBytes
	}
	tailLen, err := tailLength(r, bound)
	if err != nil {
		return response{}, nil, err
	}
	var answerTail bytes.Buffer
	answerTail.Grow(int(min64(tailLen, 1<<20)))
	if _, err := io.CopyN(&answerTail, c.conn, int64(tailLen)); err != nil {
		return fail("reading from", err)
	}
	return r, answerTail.Bytes(), nil
}

func min64(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}
