// Package jq evaluates a jq filter against a JSON input and returns the JSON-stringified
// result, as the in-process gojq wrapper it replaces did, with the same constants, output
// shape and error discipline; the filter now runs in a jqjail daemon's confined worker, whose
// kernel-enforced limits (memory, CPU, a system-call allowlist) hold where a heap sampler in
// the caller's process could only poll.
//
// Changing from the old package is one import line: its path becomes
// "jqjail.dev/jqjail/jq"; calls to jq.Run stay as they are.
package jq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"jqjail.dev/jqjail"
)

// DefaultTimeout is applied when the context passed to Run carries no deadline.
const DefaultTimeout = 5 * time.Second

// MaxHeapGrowthBytes bounds the memory a single Run may take; the daemon enforces it in the
// worker (its max_heap_bytes, 256 MiB by default) and Run reports it as MEMORY_LIMIT.
const MaxHeapGrowthBytes = 256 << 20

// MaxInputBytes is the cap on the size of the input passed to Run.
const MaxInputBytes = 20 << 20

// MaxOutputBytes is the cap on the JSON-encoded size of the filtered result (array framing
// included).
const MaxOutputBytes = 100_000

// Socket is the daemon's socket; "" uses the discovery every jqjail client shares
// ($JQJAIL_SOCKET, the system service, the user's private daemon).
var Socket = ""

// Run evaluates filter against input (one JSON text) and returns the result as JSON text:
// exactly one output → that value (a string output is quoted); several → an array of them;
// none → null. Integers keep every digit.
//
// Bounds: input ≤ MaxInputBytes; output ≤ MaxOutputBytes; ctx's deadline, or DefaultTimeout
// without one, is sent as the run's time limit (capped at the daemon's), and cancelling ctx
// abandons the run. Errors are loud and self-describing; those the daemon answers unwrap
// (errors.As) to a *jqjail.Error with its Code, Limit and Actual, and a run stopped by ctx's
// deadline also matches context.DeadlineExceeded.
func Run(ctx context.Context, filter string, input []byte) (string, error) {
	if len(input) > MaxInputBytes {
		return "", fmt.Errorf("jq: input is %d bytes, over the %d-byte MaxInputBytes limit; narrow the remote call instead of filtering this much in memory", len(input), MaxInputBytes)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("jq: the context ended before the run: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	// A kept connection the daemon has since closed (its idle timeout) fails before the run
	// reaches it; runs have no side effects, so the run is tried once more, on a new
	// connection (the other kept ones may be as old).
	for attempt := 0; ; attempt++ {
		out, timeout, ctxs, pooled, err := runOnce(ctx, filter, input, attempt > 0)
		var none noConnection
		if errors.As(err, &none) {
			return "", none.error
		}
		var e *jqjail.Error
		lost := err != nil && errors.As(err, &e) && e.Code == jqjail.Unavailable
		if lost && pooled && attempt == 0 && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return "", explain(ctx, err, timeout, ctxs)
		}
		return out, nil
	}
}

// noConnection is a run that got no connection: its error is worded already.
type noConnection struct{ error }

// runOnce runs on a kept connection (or a new one when fresh), which goes back to the pool
// however the run ends, a panic included.
func runOnce(ctx context.Context, filter string, input []byte, fresh bool) (string, uint64, bool, bool, error) {
	c, pooled, err := take(ctx, fresh)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return "", 0, false, false, noConnection{&ctxError{
				msg: fmt.Sprintf("jq: the context ended while the run waited for a connection (%d at most): %v", MaxConnections, cerr),
				err: err,
				ctx: cerr,
			}}
		}
		return "", 0, false, false, noConnection{fmt.Errorf("jq: no jqjail daemon to run the filter: %w", err)}
	}
	defer func() { give(c, c.Usable()) }()
	out, timeout, ctxs, err := runOn(ctx, c, filter, input)
	return out, timeout, ctxs, pooled, err
}

// runOn runs on c with what is left of ctx's deadline as the time limit, and says whether the
// limit sent was that deadline (true) or the daemon's own cap (false).
func runOn(ctx context.Context, c *jqjail.Client, filter string, input []byte) (string, uint64, bool, error) {
	deadline, _ := ctx.Deadline()
	timeout := uint64(time.Until(deadline).Milliseconds())
	if timeout == 0 {
		return "", 0, true, context.DeadlineExceeded
	}
	ctxs := true
	if max := c.Limits().TimeoutMs; timeout > max {
		timeout, ctxs = max, false
	}
	maxOutput := uint64(MaxOutputBytes)
	if max := c.Limits().MaxOutputBytes; maxOutput > max {
		maxOutput = max
	}
	result, err := c.Run(ctx, filter, input, &jqjail.RunOptions{TimeoutMs: timeout, MaxOutputBytes: maxOutput})
	if err != nil {
		return "", timeout, ctxs, err
	}
	return string(result.Output), timeout, ctxs, nil
}

// ctxError is an error the context caused (a daemon's TIMEOUT that its deadline set, a run
// abandoned when it was cancelled): it unwraps to the daemon's *jqjail.Error, if any, and
// also matches the context's error (context.DeadlineExceeded or context.Canceled).
type ctxError struct {
	msg string
	err error
	ctx error
}

func (d *ctxError) Error() string        { return d.msg }
func (d *ctxError) Unwrap() error        { return d.err }
func (d *ctxError) Is(target error) bool { return target == d.ctx }

// explain words an error for a model or an operator, keeping it unwrappable. ctxs says the
// time limit sent was what was left of ctx's deadline: the daemon's TIMEOUT is then that
// deadline, even when its answer arrives a moment before ctx's own timer fires (the limit is
// whole milliseconds, rounded down).
func explain(ctx context.Context, err error, timeoutMs uint64, ctxs bool) error {
	var e *jqjail.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("jq: %w", err)
	}
	switch e.Code {
	case "TIMEOUT":
		if ctxs || ctx.Err() != nil {
			msg := fmt.Sprintf("jq: filter stopped at the context's deadline (%d ms): %v", timeoutMs, err)
			return &ctxError{msg: msg, err: err, ctx: context.DeadlineExceeded}
		}
		// The context allowed longer than the daemon does: said, with the daemon's cap.
		return fmt.Errorf("jq: filter stopped at the daemon's time limit of %d ms, before the context's deadline (the daemon's timeout_ms caps every run): %w", timeoutMs, err)
	case "MEMORY_LIMIT":
		return fmt.Errorf("jq: filter needed more than the %d-byte memory budget; narrow it: %w", uint64(MaxHeapGrowthBytes), err)
	case "OUTPUT_TOO_LARGE":
		return fmt.Errorf("jq: filtered result is over %d bytes; narrow the filter: %w", MaxOutputBytes, err)
	case "COMPILE_ERROR":
		return fmt.Errorf("jq: parse filter: %w", err)
	case "INVALID_JSON", "INPUT_TOO_DEEP":
		return fmt.Errorf("jq: input: %w", err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		// Abandoned because ctx ended: the error says so and matches ctx's.
		return &ctxError{msg: fmt.Sprintf("jq: %v (%v)", err, cerr), err: err, ctx: cerr}
	}
	return fmt.Errorf("jq: %w", err)
}

// MaxConnections is how many connections to the daemon Run holds at once, in this process;
// more concurrent calls wait for one (as long as their context allows). The daemon takes
// 128 connections per uid by default, so a process of any concurrency stays within it and
// leaves the rest to the user's other programs.
const MaxConnections = 32

// Connections: a slot for each one open, and the idle ones kept for the next Run (a
// connection serves one request at a time).
var (
	slots = make(chan struct{}, MaxConnections)
	mu    sync.Mutex
	idle  []*jqjail.Client
)

// take is a kept connection (pooled) or, when there is none or fresh is set, a new one, in a
// slot waited for until ctx ends.
func take(ctx context.Context, fresh bool) (c *jqjail.Client, pooled bool, err error) {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	mu.Lock()
	if n := len(idle); n > 0 && !fresh {
		c := idle[n-1]
		idle = idle[:n-1]
		mu.Unlock()
		return c, true, nil
	}
	mu.Unlock()
	c, err = jqjail.Dial(ctx, Socket)
	if err != nil {
		<-slots
	}
	return c, false, err
}

// give keeps c for the next Run, or closes it, and frees its slot.
func give(c *jqjail.Client, reusable bool) {
	mu.Lock()
	if reusable {
		idle = append(idle, c)
		c = nil
	}
	mu.Unlock()
	if c != nil {
		c.Close()
	}
	<-slots
}
