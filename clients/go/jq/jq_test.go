package jq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"jqjail.dev/jqjail"
	"jqjail.dev/jqjail/internal/testdaemon"
)

func TestMain(m *testing.M) { testdaemon.Main(m) }

func code(err error) string {
	var e *jqjail.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return fmt.Sprintf("not a *jqjail.Error: %v", err)
}

// The output shape of the package it replaces: one value, an array for several, null for
// none, always JSON.
func TestOutputShape(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ filter, input, want string }{
		{".a", `{"a":1}`, "1"},
		{".[]", `[1,2]`, "[1,2]"},
		{"empty", `null`, "null"},
		{`"hello"`, `null`, `"hello"`},
		{".n", `{"n":12345678901234567890}`, "12345678901234567890"},
		{".[] | select(. > 1)", `[1,2,3]`, "[2,3]"},
	} {
		got, err := Run(ctx, tc.filter, []byte(tc.input))
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.filter, got, err, tc.want)
		}
	}
}

// Seed 000's example: a 20 MiB tool result narrowed to its IDs.
func TestATwentyMebibyteResultIsNarrowed(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	body := strings.Repeat("x", 10_000)
	n := 0
	for b.Len() < MaxInputBytes-20_000 {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"body":"%s"}`, n, body)
		n++
	}
	b.WriteString("]}")
	start := time.Now()
	out, err := Run(context.Background(), "[.items[] | .id] | length", []byte(b.String()))
	if err != nil || out != fmt.Sprint(n) {
		t.Fatalf("%q %v", out, err)
	}
	ids, err := Run(context.Background(), ".items[] | .id", []byte(b.String()))
	if err != nil || !strings.HasPrefix(ids, "[0,1,2,") {
		t.Fatalf("%.40q %v", ids, err)
	}
	t.Logf("%d items, %d bytes: %v", n, b.Len(), time.Since(start))
}

func TestBoundsAreLoudAndTyped(t *testing.T) {
	ctx := context.Background()
	// A hostile filter: stopped by the worker's memory (or CPU, or time) limit.
	_, err := Run(ctx, "[range(1e9)]", []byte("null"))
	if c := code(err); c != "MEMORY_LIMIT" && c != "CPU_LIMIT" && c != "TIMEOUT" {
		t.Fatalf("[range(1e9)]: %v", err)
	}
	// The output cap, naming the limit.
	_, err = Run(ctx, "[range(100000)]", []byte("null"))
	var e *jqjail.Error
	if !errors.As(err, &e) || e.Code != "OUTPUT_TOO_LARGE" || e.Limit == nil || *e.Limit != MaxOutputBytes {
		t.Fatalf("output cap: %v", err)
	}
	// The input cap, before anything is sent.
	_, err = Run(ctx, ".", make([]byte, MaxInputBytes+1))
	if err == nil || !strings.Contains(err.Error(), "MaxInputBytes") {
		t.Fatalf("input cap: %v", err)
	}
	// A filter that does not parse.
	if _, err := Run(ctx, ".[", []byte("null")); code(err) != "COMPILE_ERROR" {
		t.Fatal(err)
	}
	// The environment is not the filter's: a secret in it never comes back.
	os.Setenv("JQJAIL_TEST_SECRET", "hunter2")
	for _, f := range []string{"env", "$ENV"} {
		out, err := Run(ctx, f, []byte("null"))
		if strings.Contains(out, "hunter2") || (err != nil && strings.Contains(err.Error(), "hunter2")) {
			t.Fatalf("%s leaked the environment: %s %v", f, out, err)
		}
	}
}

// The context's deadline is the run's time limit: a filter that never ends is stopped at it
// by the daemon, and the error says both what happened and that the deadline passed.
func TestTheContextsDeadlineIsTheTimeLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, "def f: f; f", []byte("null"))
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	if c := code(err); c != "TIMEOUT" && c != "CPU_LIMIT" {
		t.Fatalf("not the daemon's answer: %v", err)
	}
	if elapsed > 300*time.Millisecond+deadlineSlack {
		t.Fatalf("took %v for a 300 ms deadline", elapsed)
	}
	// A run after it is served as usual (a kept connection is reused).
	if out, err := Run(context.Background(), "1+1", []byte("null")); err != nil || out != "2" {
		t.Fatal(out, err)
	}
}

// deadlineSlack: the grace the client gives the daemon's own answer, and a worker's kill.
const deadlineSlack = 2 * time.Second

// Seed 000's callers run hundreds of calls at once. Each took a connection of its own, and
// past the daemon's 128 per uid they failed UNAVAILABLE (172 of 300). Now they queue for one
// of MaxConnections and all are answered.
func TestThreeHundredConcurrentRunsAreAllAnswered(t *testing.T) {
	const n = 300
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			out, err := Run(context.Background(), ".n", []byte(fmt.Sprintf(`{"n":%d}`, i)))
			if err == nil && out != fmt.Sprint(i) {
				err = fmt.Errorf("run %d answered %q", i, out)
			}
			errs <- err
		}(i)
	}
	failed := 0
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			failed++
			t.Log(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d concurrent runs failed", failed, n)
	}
}

// A context cancelled before or during a run: the error matches context.Canceled (it was
// UNAVAILABLE "operation was canceled", which matched nothing).
func TestACancelledContextMatchesCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, ".", []byte("1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, err := Run(ctx, "def f: f; f", []byte("null"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled during: %v", err)
	}
	if time.Since(start) > deadlineSlack {
		t.Fatalf("a cancelled run took %v to end", time.Since(start))
	}
	// Later runs are served as usual.
	if out, err := Run(context.Background(), "1+1", []byte("null")); err != nil || out != "2" {
		t.Fatal(out, err)
	}
}
