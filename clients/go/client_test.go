package jqjail

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"jqjail.dev/jqjail/internal/testdaemon"
)

func TestMain(m *testing.M) {
	// Run again as a service account by TestThePrivateSocketIsWhereTheCLIPutsItsDaemon.
	if os.Getenv(printPrivateSocket) != "" {
		fmt.Println(PrivateSocket())
		os.Exit(0)
	}
	if n := os.Getenv(dialAndRun); n != "" {
		dialAndRunMain(n)
	}
	testdaemon.Main(m)
}

func dialT(t *testing.T) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "not a jqjail error: " + err.Error()
}

type vector struct {
	Name         string `json:"name"`
	JSON         string `json:"json"`
	JSONFrameHex string `json:"json_frame_hex"`
	TailHex      string `json:"tail_hex"`
}

func vectors(t *testing.T) (requests, responses map[string]vector) {
	text, err := os.ReadFile(filepath.Join(testdaemon.Repo(), "protocol", "vectors", "messages.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Requests  []vector `json:"requests"`
		Responses []vector `json:"responses"`
	}
	if err := json.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	index := func(vs []vector) map[string]vector {
		m := map[string]vector{}
		for _, v := range vs {
			m[v.Name] = v
		}
		return m
	}
	return index(doc.Requests), index(doc.Responses)
}

// normal is a JSON value with nulls, empty objects and empty arrays left out: the forms a
// request may leave out to mean the default.
func normal(t *testing.T, text []byte) any {
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				e = walk(e)
				if m, ok := e.(map[string]any); e == nil || (ok && len(m) == 0) {
					continue
				}
				if a, ok := e.([]any); ok && len(a) == 0 {
					continue
				}
				out[k] = e
			}
			return out
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		}
		return v
	}
	return walk(v)
}

// The requests this client writes mean what the vectors' requests mean, and every response
// vector decodes, with the tail length the vector's tail has.
func TestConformanceVectors(t *testing.T) {
	requests, responses := vectors(t)
	run := func(filter string, input any, o *RunOptions) any {
		r, err := o.request(filter, input)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ours := map[string]any{
		"hello":      helloRequest("my-agent/2.3"),
		"run inline": run(".a", map[string]any{"inline": 7}, nil),
		"run with every field": run(".items[] | $x", map[string]any{"inline": 13}, &RunOptions{
			MaxOutputBytes: 1000, TimeoutMs: 300, MaxDepth: 64, Hide: true, Lines: true,
			Args: []Arg{{"x", "text"}}, Positional: []any{42},
		}),
		"run over a hide":                      run("length", map[string]any{"hide": "github-1a2b3c4d"}, nil),
		"run over values":                      run("[inputs]", map[string]any{"values": map[string]any{"values": 11, "null_input": true}}, nil),
		"run in the path language":             run("items[*].name", map[string]any{"inline": 12}, &RunOptions{Lang: LangPath}),
		"shape of a hide":                      run("", map[string]any{"hide": "github-1a2b3c4d"}, &RunOptions{Lang: LangShape}),
		"stats":                                "stats",
		"hide_put":                             putRequest("tool_output", "GitHub", 10, map[string]string{"turn": "7"}),
		"hide_put of bytes that are not UTF-8": putRequest("", "bin", 3, nil),
		"hide_get":                             idRequest("hide_get", "github-1a2b3c4d"),
		"hide_cut":                             cutRequest("github-1a2b3c4d", 2, 64, true),
		"hide_page by number":                  pageRequest("github-1a2b3c4d", map[string]any{"page": 2}, PageOptions{PageSize: 600, Hint: true}),
		"hide_page by path":                    pageRequest("github-1a2b3c4d", map[string]any{"path": "$[17].labels"}, PageOptions{}),
		"hide_page by offset":                  pageRequest("github-1a2b3c4d", map[string]any{"offset": 70}, PageOptions{PageSize: 64}),
		"hide_page in bytes":                   pageRequest("github-1a2b3c4d", map[string]any{"page": 1}, PageOptions{Bytes: true}),
		"hide_ends":                            endsRequest("github-1a2b3c4d", EndsOptions{PageSize: 1200, Hint: true, MaxPathBytes: 64}),
		"hide_search":                          searchRequest("github-1a2b3c4d", "needle", SearchOptions{IgnoreCase: true, MaxMatches: 10}),
		"hide_list":                            listRequest(100, 50),
		"hide_delete":                          idRequest("hide_delete", "github-1a2b3c4d"),
		"hide_usage":                           "hide_usage",
	}
	for name, request := range ours {
		v, ok := requests[name]
		if !ok {
			t.Fatalf("no request vector %q", name)
		}
		body, _ := json.Marshal(request)
		if got, want := normal(t, body), normal(t, []byte(v.JSON)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: we write %s, the vector is %s", name, body, v.JSON)
		}
	}
	if len(ours) != len(requests) {
		t.Errorf("%d request vectors, %d checked", len(requests), len(ours))
	}
	for name, v := range responses {
		framed, _ := hex.DecodeString(v.JSONFrameHex)
		if !bytes.Equal(frame([]byte(v.JSON)), framed) {
			t.Errorf("%s: the frame differs", name)
		}
		r, err := decodeResponse([]byte(v.JSON))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n, err := tailLength(r, 1<<30)
		if err != nil || n != uint64(len(v.TailHex)/2) {
			t.Errorf("%s: tail of %d bytes (%v), the vector's is %d", name, n, err, len(v.TailHex)/2)
		}
	}
}

// The error exchanges every client replays, over a raw connection framed by this client.
func TestConformanceExchanges(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(testdaemon.Repo(), "protocol", "vectors", "exchanges.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Exchanges []struct {
			Name   string `json:"name"`
			Hello  bool   `json:"hello"`
			Closed bool   `json:"closed"`
			Steps  []struct {
				Send    json.RawMessage `json:"send"`
				TailHex string          `json:"tail_hex"`
				Expect  *struct {
					Response  string   `json:"response"`
					Code      string   `json:"code"`
					CodeOneOf []string `json:"code_one_of"`
					Limit     *uint64  `json:"limit"`
					Actual    *uint64  `json:"actual"`
					TailHex   *string  `json:"tail_hex"`
				} `json:"expect"`
			} `json:"steps"`
		} `json:"exchanges"`
	}
	if err := json.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	for _, ex := range doc.Exchanges {
		conn, err := net.Dial("unix", os.Getenv(SocketEnv))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		send := func(body []byte, tail []byte) {
			if _, err := conn.Write(append(frame(body), tail...)); err != nil {
				t.Fatalf("%s: %v", ex.Name, err)
			}
		}
		recv := func() (response, []byte) {
			body, err := readFrame(conn)
			if err != nil {
				t.Fatalf("%s: %v", ex.Name, err)
			}
			r, err := decodeResponse(body)
			if err != nil {
				t.Fatalf("%s: %v", ex.Name, err)
			}
			n, err := tailLength(r, 1<<30)
			if err != nil {
				t.Fatalf("%s: %v", ex.Name, err)
			}
			tail := make([]byte, n)
			if _, err := io.ReadFull(conn, tail); err != nil {
				t.Fatalf("%s: %v", ex.Name, err)
			}
			return r, tail
		}
		if ex.Hello {
			send([]byte(`{"hello":{"protocol":2}}`), nil)
			if r, _ := recv(); r.kind != "hello" {
				t.Fatalf("%s: hello answered %s", ex.Name, r.kind)
			}
		}
		for _, step := range ex.Steps {
			if step.Expect == nil {
				tail, _ := hex.DecodeString(step.TailHex)
				send(step.Send, tail)
				continue
			}
			want := step.Expect
			r, tail := recv()
			if r.kind != want.Response {
				t.Fatalf("%s: expected %s, got %s %s", ex.Name, want.Response, r.kind, r.fields)
			}
			if r.kind == "error" {
				e := errorOf(r.fields).(*Error)
				ok := e.Code == want.Code
				for _, c := range want.CodeOneOf {
					ok = ok || e.Code == c
				}
				if !ok {
					t.Errorf("%s: code %s (%s)", ex.Name, e.Code, e.Message)
				}
				if want.Limit != nil && (e.Limit == nil || *e.Limit != *want.Limit) {
					t.Errorf("%s: limit %v", ex.Name, e.Limit)
				}
				if want.Actual != nil && (e.Actual == nil || *e.Actual != *want.Actual) {
					t.Errorf("%s: actual %v", ex.Name, e.Actual)
				}
			}
			if want.TailHex != nil && hex.EncodeToString(tail) != *want.TailHex {
				t.Errorf("%s: tail %q", ex.Name, tail)
			}
		}
		if ex.Closed {
			n, err := conn.Read(make([]byte, 1))
			if n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
				t.Errorf("%s: not closed: %d bytes, %v", ex.Name, n, err)
			}
		}
		conn.Close()
	}
}

func TestRunsAndTheirOptions(t *testing.T) {
	c := dialT(t)
	ctx := context.Background()
	if c.Limits().MaxOutputBytes == 0 || !strings.HasPrefix(c.Server(), "jqjaild/") {
		t.Fatalf("hello: %+v %s", c.Limits(), c.Server())
	}
	check := func(got *Result, err error, want string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Output) != want {
			t.Fatalf("got %s, want %s", got.Output, want)
		}
	}
	r, err := c.Run(ctx, ".a", []byte(`{"a":12345678901234567890}`), nil)
	check(r, err, "12345678901234567890")
	r, err = c.RunValue(ctx, "[.[] | . * 2]", []int{1, 2}, nil)
	check(r, err, "[2,4]")
	r, err = c.Run(ctx, ".[]", []byte(`[1,[2]]`), &RunOptions{Lines: true})
	check(r, err, "1\n[2]\n")
	r, err = c.Run(ctx, "[$x, $ARGS.positional[0]]", []byte(`null`), &RunOptions{
		Args: []Arg{{"x", map[string]any{"k": "v"}}}, Positional: []any{"p"},
	})
	check(r, err, `[{"k":"v"},"p"]`)
	r, err = c.RunValues(ctx, "reduce inputs as $x (0; . + $x)", []byte("1 2 3"), true, nil)
	check(r, err, "6")
	r, err = c.Run(ctx, "items[*].name", []byte(`{"items":[{"name":"a"},{}]}`), &RunOptions{Lang: LangPath})
	check(r, err, `["a"]`)
	shape, err := c.Shape(ctx, []byte(`{"a":[1,2]}`))
	if err != nil || !strings.Contains(string(shape), `"type":"object"`) {
		t.Fatalf("shape %s %v", shape, err)
	}
	_, err = c.Run(ctx, "a.b", []byte(`{"a":1}`), &RunOptions{Lang: LangPath})
	if codeOf(err) != "TYPE_MISMATCH" {
		t.Fatal(err)
	}
	// An error answers one request; the connection goes on.
	r, err = c.Run(ctx, "1+1", []byte("null"), nil)
	check(r, err, "2")
	stats, err := c.Stats(ctx)
	if err != nil || stats.Outcomes[0].Count == 0 || stats.Connections == 0 {
		t.Fatalf("stats %+v %v", stats, err)
	}
}

// The README tour's hostile filters, answered by their codes; the client stays usable.
func TestHostileFiltersAreAnsweredByTheirCodes(t *testing.T) {
	c := dialT(t)
	ctx := context.Background()
	input := []byte(`[{"a":1}]`)
	for _, tc := range []struct {
		filter string
		o      *RunOptions
		codes  []string
	}{
		{"[range(1e9)]", nil, []string{"MEMORY_LIMIT", "CPU_LIMIT", "TIMEOUT"}},
		{"def f: f; f", &RunOptions{TimeoutMs: 500}, []string{"TIMEOUT", "CPU_LIMIT"}},
		{"def f: [f]; f", nil, []string{"STACK_LIMIT", "MEMORY_LIMIT"}},
		{"[range(100000)]", &RunOptions{MaxOutputBytes: 1000}, []string{"OUTPUT_TOO_LARGE"}},
		{`include "/etc/passwd"; .`, nil, []string{"COMPILE_ERROR"}},
	} {
		_, err := c.Run(ctx, tc.filter, input, tc.o)
		code := codeOf(err)
		found := false
		for _, want := range tc.codes {
			found = found || code == want
		}
		if !found {
			t.Errorf("%s: %v, want one of %v", tc.filter, err, tc.codes)
		}
		var e *Error
		if errors.As(err, &e) && e.Code == "OUTPUT_TOO_LARGE" && (e.Limit == nil || *e.Limit != 1000) {
			t.Errorf("the output limit is not named: %+v", e)
		}
	}
	r, err := c.Run(ctx, "env", input, nil)
	if err != nil || string(r.Output) != "{}" {
		t.Fatalf("env: %s %v", r.Output, err)
	}
}

func TestHidesThroughTheClient(t *testing.T) {
	c := dialT(t)
	ctx := context.Background()
	content := bytes.Repeat([]byte("ab"), 100)
	put, err := c.HidePut(ctx, "k", "Tool X", content, map[string]string{"turn": "7"})
	if err != nil || !put.Created || !strings.HasPrefix(put.Entry.ID, "toolx-") {
		t.Fatalf("put %+v %v", put, err)
	}
	id := put.Entry.ID
	entry, got, err := c.HideGet(ctx, id)
	if err != nil || !bytes.Equal(got, content) || entry.Meta["turn"] != "7" {
		t.Fatalf("get %v", err)
	}
	cut, err := c.HideCut(ctx, id, 4, 64, true)
	if err != nil || string(cut.Content) != "abababab" || cut.TotalPages != 4 || !strings.Contains(cut.Preface, "page 4 of 4") {
		t.Fatalf("cut %+v %v", cut, err)
	}
	found, err := c.HideSearch(ctx, id, "BA", SearchOptions{IgnoreCase: true, MaxMatches: 2})
	if err != nil || len(found.Matches) != 2 || found.Matches[0].Offset != 1 || !found.Truncated {
		t.Fatalf("search %+v %v", found, err)
	}
	if _, err := c.HideCut(ctx, id, 9, 64, false); codeOf(err) != "PAGE_OUT_OF_RANGE" {
		t.Fatal(err)
	}
	// JSON pages: by number and by path; text falls back to byte pages.
	doc := []byte(`[{"id":0,"labels":["bug"]},{"id":1,"labels":["p1","p2"]},{"id":2,"labels":[]}]`)
	jput, err := c.HidePut(ctx, "k", "json", doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	var joined []byte
	for n := uint64(1); ; n++ {
		p, err := c.HidePage(ctx, jput.Entry.ID, n, PageOptions{PageSize: 64, Hint: true})
		if err != nil || p.Pages != "json" || p.JSON == nil {
			t.Fatalf("json page %d: %+v %v", n, p, err)
		}
		joined = append(joined, p.Content...)
		if n == 2 && (p.JSON.Array == nil || p.JSON.Array.Path != "$" || p.JSON.Array.Length != 3) {
			t.Fatalf("page 2 is not placed in $'s 3 elements: %+v", p.JSON)
		}
		if n == p.TotalPages {
			break
		}
	}
	if !bytes.Equal(joined, doc) {
		t.Fatalf("the JSON pages are not the document: %s", joined)
	}
	at, err := c.HidePageAt(ctx, jput.Entry.ID, ".[2].labels", PageOptions{PageSize: 64})
	if value := uint64(bytes.Index(doc, []byte(`[]}`))); err != nil || at.Offset > value || value >= at.Offset+uint64(len(at.Content)) {
		t.Fatalf("page at .[2].labels: %+v %v", at, err)
	}
	if held, err := c.HidePageHolding(ctx, jput.Entry.ID, uint64(bytes.Index(doc, []byte(`[]}`))), PageOptions{PageSize: 64}); err != nil || held.Page != at.Page {
		t.Fatalf("page holding the offset: %+v %v", held, err)
	}
	if _, err := c.HidePageAt(ctx, jput.Entry.ID, "$[3]", PageOptions{}); codeOf(err) != "NOT_FOUND" {
		t.Fatal(err)
	}
	if text, err := c.HidePage(ctx, id, 1, PageOptions{PageSize: 64}); err != nil || text.Pages != "bytes" || text.NotJSON == "" {
		t.Fatalf("text page %+v %v", text, err)
	}
	// An output over the limit kept as a hide, then filtered by its ID.
	r, err := c.Run(ctx, "[range(3000)]", []byte("null"), &RunOptions{Hide: true, MaxOutputBytes: 1000})
	if err != nil || r.Hidden == nil || !bytes.HasPrefix(r.Hidden.First.Content, []byte("[0,1,2")) {
		t.Fatalf("hidden %+v %v", r, err)
	}
	n, err := c.RunHide(ctx, "length", r.Hidden.Entry.ID, nil)
	if err != nil || string(n.Output) != "3000" {
		t.Fatalf("run over the hide: %v", err)
	}
	all, err := c.HideList(ctx)
	if err != nil || len(all) < 2 || all[0].ID != r.Hidden.Entry.ID {
		t.Fatalf("list %+v %v", all, err)
	}
	page, err := c.HideListPage(ctx, 0, 1)
	if err != nil || len(page.Entries) != 1 || page.Next == nil {
		t.Fatalf("list page %+v %v", page, err)
	}
	usage, err := c.HideUsage(ctx)
	if err != nil || usage.Entries < 2 {
		t.Fatalf("usage %+v %v", usage, err)
	}
	if _, err := c.HideDelete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.HideGet(ctx, id); codeOf(err) != "NOT_FOUND" {
		t.Fatal(err)
	}
}

// A daemon that lies: a hello frame longer than any the daemon sends is refused before it
// is allocated, and the client says why.
func TestALyingDaemonIsBounded(t *testing.T) {
	path := liar(t, func(conn net.Conn) {
		io.ReadFull(conn, make([]byte, 4))
		var prefix [4]byte
		binary.LittleEndian.PutUint32(prefix[:], 0xFFFFFFF0)
		conn.Write(prefix[:])
		time.Sleep(time.Second)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, path)
	if codeOf(err) != Unavailable || !strings.Contains(err.Error(), "over the 8388608-byte maximum") {
		t.Fatal(err)
	}
}

func TestUntrustedUIDsAreNamedClearly(t *testing.T) {
	t.Setenv(DaemonUIDsEnv, "1000,nobody")
	if _, err := TrustedUIDs(); err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatal(err)
	}
}

func TestCancellingAbandonsTheRequest(t *testing.T) {
	c := dialT(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := c.Run(ctx, "def f: f; f", []byte("null"), nil)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 3*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	// The connection was abandoned mid-request: later calls say so.
	if _, err := c.Stats(context.Background()); err == nil {
		t.Fatal("a connection abandoned mid-request was used again")
	}
}

func TestToolDefsAreTheCLIs(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(testdaemon.Repo(), "clients", "python", "src", "jqjail", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, toolsJSON) {
		t.Fatal("clients/go/tools.json differs from the list `jqjail tools` prints")
	}
	var names []string
	for _, d := range ToolDefs() {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "jq,json_path,json_shape,hide_next,hide_jump,hide_search" {
		t.Fatal(names)
	}
}

// A context cancelled after its call returned must not reach the next call on the same
// connection (its watcher had not exited: about one call in 3,000 failed).
func TestACancelAfterACallNeverReachesTheNext(t *testing.T) {
	c := dialT(t)
	for i := 0; i < 3000; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := c.Stats(ctx)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// An answer after which the daemon closes the connection leaves the client unusable, so a
// pool never hands it out again.
func TestAClosingAnswerEndsTheClient(t *testing.T) {
	c := dialT(t)
	_, err := c.Run(context.Background(), "$x", []byte("null"), &RunOptions{Args: []Arg{{"x", 1}, {"x", 2}}})
	if codeOf(err) != "PROTOCOL_ERROR" {
		t.Fatal(err)
	}
	if c.Usable() {
		t.Fatal("usable after PROTOCOL_ERROR")
	}
}

// A lying daemon's list pages that never move on are refused, not gathered for ever.
func TestAHideListThatDoesNotMoveOnIsRefused(t *testing.T) {
	path := liar(t, func(conn net.Conn) {
		answer := func(v string) { conn.Write(frame([]byte(v))) }
		read := func() bool { _, err := readFrame(conn); return err == nil }
		read()
		answer(`{"hello":{"protocol":2,"server":"liar","limits":{"max_input_bytes":1000,"max_filter_bytes":1000,"max_depth":10,"max_output_bytes":1000,"timeout_ms":1000,"max_heap_bytes":1000}}}`)
		entry := `{"id":"a-00000000","kind":"","source":"","size":1,"sha256":"","meta":{},"created_ms":0}`
		for i := 0; read(); i++ {
			answer(fmt.Sprintf(`{"hide_list":{"entries":[%s,%s],"total":9,"next":%d}}`, entry, entry, i+1))
		}
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.HideList(context.Background()); codeOf(err) != Unavailable || !strings.Contains(err.Error(), "does not move on") {
		t.Fatal(err)
	}
}

// liar listens on a socket in a temporary directory and serves its first connection with
// serve: a daemon that lies, for the client's bounds. Returns the socket's path.
func liar(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "liar.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		serve(conn)
	}()
	return path
}

// readFrame reads one frame's body (a test's own reader, unbounded: the peer is the daemon
// under test or the test itself).
func readFrame(r io.Reader) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.LittleEndian.Uint32(prefix[:]))
	_, err := io.ReadFull(r, body)
	return body, err
}

// A lying daemon's head and tail is refused, never sliced or summed (an attacker's review).
func TestALyingHeadAndTailIsRefused(t *testing.T) {
	good := func() *HideEnds {
		nine := uint64(9)
		return &HideEnds{
			HideID: "x-00000000", Size: 100, PageSize: 40, Pages: "bytes",
			Head:    End{Offset: 0, Length: 20},
			Tail:    &End{Offset: 80, Length: 20},
			LeftOut: &LeftOut{Offset: 20, Bytes: 60, Elements: &ElementsLeftOut{Array: "$", From: 1, To: 3, Length: &nine}},
			Content: make([]byte, 40),
		}
	}
	if err := checkEnds(good()); err != nil {
		t.Fatal(err)
	}
	lies := []func(e *HideEnds){
		func(e *HideEnds) { e.Head.Length = 41 },
		func(e *HideEnds) { e.Head.Offset = 1 },
		func(e *HideEnds) { e.LeftOut.Bytes = ^uint64(0) },
		func(e *HideEnds) { e.Tail.Offset = ^uint64(0) },
		func(e *HideEnds) { e.Size = 99 },
		func(e *HideEnds) { e.Tail = nil },
		func(e *HideEnds) { e.LeftOut.Elements.From = 5 },
	}
	for n, lie := range lies {
		e := good()
		lie(e)
		if checkEnds(e) == nil {
			t.Errorf("lie %d was taken", n)
		}
	}
}
