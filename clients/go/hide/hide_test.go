package hide

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"jqjail.dev/jqjail"
	"jqjail.dev/jqjail/internal/testdaemon"
)

func TestMain(m *testing.M) { testdaemon.Main(m) }

// The old package's test surface, against the daemon's store.
func TestStorePutGetCutListDelete(t *testing.T) {
	s := NewStore("")
	content := []byte(strings.Repeat("0123456789", 100) + "é")
	e, err := s.Put("webhook", "GitHub Intake", content, map[string]string{"turn": "3"})
	if err != nil || !strings.HasPrefix(e.ID, "githubintake-") || e.SizeBytes != int64(len(content)) {
		t.Fatalf("put %+v %v", e, err)
	}
	got, bytes, err := s.Get(e.ID)
	if err != nil || string(bytes) != string(content) || got.Meta["turn"] != "3" {
		t.Fatalf("get %v", err)
	}
	// Pages: TotalPages agrees with the length; no page splits the last character.
	var joined strings.Builder
	first, err := s.Cut(e.ID, 1, 64)
	if err != nil || first.TotalPages != (len(content)+63)/64 {
		t.Fatalf("cut %+v %v", first, err)
	}
	for p := 1; p <= first.TotalPages; p++ {
		c, err := s.Cut(e.ID, p, 64)
		if err != nil {
			t.Fatal(err)
		}
		joined.WriteString(c.Content)
	}
	if joined.String() != string(content) {
		t.Fatal("the pages do not join back to the content")
	}
	if _, err := s.Cut(e.ID, 99, 64); err == nil || !strings.Contains(err.Error(), "PAGE_OUT_OF_RANGE") {
		t.Fatal(err)
	}
	second, err := s.Put("webhook", "other", []byte("[1]"), nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) < 2 || list[0].ID != second.ID {
		t.Fatalf("list (newest first): %+v %v", list, err)
	}
	if err := s.Delete(e.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(e.ID); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Fatal(err)
	}
}

func TestParallelPutsDoNotCorrupt(t *testing.T) {
	s := NewStore("")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			content := []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("p", 5000)))
			e, err := s.Put("k", "parallel", content, nil)
			if err != nil {
				errs <- err
				return
			}
			if _, got, err := s.Get(e.ID); err != nil || string(got) != string(content) {
				errs <- fmt.Errorf("%s read back wrong: %v", e.ID, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHideBufferPagesSearchesAndLoads(t *testing.T) {
	b := NewHideBuffer(100)
	if b.NeedsPaging() {
		t.Fatal("an empty buffer needs no paging")
	}
	if _, err := b.FirstCut(); err == nil {
		t.Fatal("a first cut of nothing")
	}
	var text strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&text, "row %02d\n", i) // 350 bytes
	}
	h := b.Store("search_tool", text.String())
	if b.Err() != nil || h.ID == "" || h.Content != text.String() {
		t.Fatal(b.Err())
	}
	if !b.NeedsPaging() {
		t.Fatal("350 bytes at 100 a page need paging")
	}
	first, err := b.FirstCut()
	if err != nil || first.Page != 1 || first.TotalPages != 4 || first.Preface == "" {
		t.Fatalf("%+v %v", first, err)
	}
	next, err := b.Next("")
	if err != nil || next.Page != 2 || next.Preface != "" {
		t.Fatalf("%+v %v", next, err)
	}
	found, ok, err := b.Search(h.ID, "row 40")
	if err != nil || !ok || found.Page != 3 || !strings.Contains(found.Content, "row 40") {
		t.Fatalf("%+v %v %v", found, ok, err)
	}
	if _, ok, err := b.Search(h.ID, "absent"); ok || err != nil {
		t.Fatal("a miss is false, not an error", err)
	}
	if got, ok := b.Get(h.ID); !ok || got.Content != text.String() {
		t.Fatal("get")
	}
	if _, ok := b.Get("nope-00000000"); ok {
		t.Fatal("an unknown hide")
	}
	loaded, err := NewStore("").LoadIntoBuffer(h.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	again, err := loaded.FirstCut()
	if err != nil || again.Content != first.Content {
		t.Fatal("a loaded buffer reproduces the hide", err)
	}
	// The tools a model calls.
	if out := b.CallTool("hide_jump", map[string]any{"page": 3.0}); !strings.Contains(out, "page=3/4") {
		t.Fatal(out)
	}
	if out := b.CallTool("hide_next", map[string]any{}); !strings.Contains(out, "page=4/4") {
		t.Fatal(out)
	}
	if out := b.CallTool("hide_search", map[string]any{"query": "ROW 07", "ignore_case": true}); !strings.Contains(out, "on page 1") {
		t.Fatal(out)
	}
	if out := b.CallTool("hide_jump", map[string]any{"page": 9.0}); !strings.HasPrefix(out, "error: PAGE_OUT_OF_RANGE") {
		t.Fatal(out)
	}
}

// A run's output kept as a hide is taken over by a buffer: hide_next goes on to page 2.
func TestABufferTakesOverAHiddenRun(t *testing.T) {
	ctx := context.Background()
	c, err := jqjail.Dial(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Run(ctx, "[range(5000)]", []byte("null"), &jqjail.RunOptions{Hide: true, MaxOutputBytes: 1000})
	if err != nil || r.Hidden == nil {
		t.Fatal(err)
	}
	// Page 1 is a byte page; this buffer's JSON page 1 ends between values, elsewhere: Next
	// serves JSON page 1, and goes on from there.
	b := NewHideBuffer(DefaultPageSize)
	b.TakeOver(r.Hidden)
	next, err := b.Next("")
	if err != nil || next.Page != 1 || next.HideID != r.Hidden.Entry.ID || next.First != "$" || !strings.HasSuffix(next.Content, ",") {
		t.Fatalf("%.200v %v", next, err)
	}
	if next, err := b.Next(""); err != nil || next.Page != 2 || !strings.Contains(Format(next), " · $[") {
		t.Fatalf("%.200v %v", next, err)
	}
	if at := b.CallTool("hide_jump", map[string]any{"path": "$[4999]"}); !strings.Contains(at, "4999]") {
		t.Fatalf("%.300s", at)
	}
	// Page 1 was cut at 16,384 bytes: a buffer of 4,096-byte pages starts again from page 1
	// at its own size, rather than serve bytes the model saw or skip some.
	small := NewHideBuffer(4096)
	small.TakeOver(r.Hidden)
	again, err := small.Next("")
	if err != nil || again.Page != 1 || !strings.HasPrefix(again.Content, "[0,1,2") {
		t.Fatalf("%+v %v", again, err)
	}
}

func TestToolDefs(t *testing.T) {
	names := func(defs []jqjail.ToolDefinition) string {
		var out []string
		for _, d := range defs {
			out = append(out, d.Name)
		}
		return strings.Join(out, ",")
	}
	// The seed's three, then all six.
	if got := names(ToolDefs()); got != "hide_next,hide_jump,hide_search" {
		t.Fatal(got)
	}
	for _, want := range []string{"hide_next", "hide_jump", "hide_search", "jq", "json_path", "json_shape"} {
		if !strings.Contains(names(AllToolDefs()), want) {
			t.Fatal(names(AllToolDefs()))
		}
	}
}

// Seed 003's callers write `h := buf.Store(src, c)`, `NewHideBuffer(32)`, and page on when
// NeedsPaging. All three compile and work: a page size under the daemon's 64 is raised to it
// (every call failed INVALID_REQUEST), and a Store that fails leaves the content paged, not
// inlined, with the error from FirstCut.
func TestTheSeedsBufferCallsWork(t *testing.T) {
	b := NewHideBuffer(32)
	if b.PageSize() != MinPageSize {
		t.Fatal(b.PageSize())
	}
	h := b.Store("seed_tool", strings.Repeat("x", 200))
	if h.ID == "" || !b.NeedsPaging() {
		t.Fatalf("%+v %v", h, b.Err())
	}
	cut, err := b.FirstCut()
	if err != nil || cut.TotalPages != 4 || len(cut.Content) != MinPageSize {
		t.Fatalf("%+v %v", cut, err)
	}
	// A store that cannot be reached: the hide has no ID, and nothing pages as if it had.
	broken := NewStore(Socket(t.TempDir() + "/none.sock")).NewHideBuffer(100)
	failed := broken.Store("seed_tool", strings.Repeat("y", 500))
	if failed.ID != "" || broken.Err() == nil || !broken.NeedsPaging() {
		t.Fatalf("%+v %v", failed, broken.Err())
	}
	if _, err := broken.FirstCut(); err == nil || !strings.Contains(err.Error(), "UNAVAILABLE") {
		t.Fatal(err)
	}
	if got := broken.CallTool("hide_next", map[string]any{}); !strings.HasPrefix(got, "error: UNAVAILABLE") {
		t.Fatal(got)
	}
}

// Issue 37: a buffer's first answer is the hide's head and tail by default, naming what lies
// between (bytes, paths, elements of the array), and hide_next then reads page 1; SetFirst(Page)
// shows page 1 first, as before.
func TestTheFirstAnswerIsHeadAndTail(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("[")
	for i := 0; i < 60; i++ {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"id":%d,"title":"issue %d"}`, i, i)
	}
	doc.WriteString("]")
	b := NewHideBuffer(400)
	h := b.Store("issues", doc.String())
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	shown, err := b.FirstAnswer("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[HIDE id=" + h.ID + " head: bytes 0..",
		"[… left out: bytes ",
		" of $, in whole or in part (60 elements) …]",
		"[HIDE id=" + h.ID + " tail: bytes ",
		"Left out between them: ",
	} {
		if !strings.Contains(shown, want) {
			t.Fatalf("no %q in\n%s", want, shown)
		}
	}
	if out := b.CallTool("hide_next", map[string]any{}); !strings.Contains(out, "page=1/") {
		t.Fatal(out)
	}
	ends, err := func() (*jqjail.HideEnds, error) {
		var e *jqjail.HideEnds
		err := NewStore("").with(func(ctx context.Context, c *jqjail.Client) error {
			var err error
			e, err = c.HideEnds(ctx, h.ID, jqjail.EndsOptions{PageSize: 400})
			return err
		})
		return e, err
	}()
	if err != nil {
		t.Fatal(err)
	}
	head, left, tail := ends.Head, ends.LeftOut, ends.Tail
	if head.Offset != 0 || left.Offset != head.Length || tail.Offset != left.Offset+left.Bytes || tail.Offset+tail.Length != uint64(doc.Len()) {
		t.Fatalf("head %+v, left out %+v, tail %+v do not make the hide", head, left, tail)
	}
	if string(ends.Content) != doc.String()[:head.Length]+doc.String()[tail.Offset:] {
		t.Fatal("the content is not the head and the tail")
	}
	b.SetFirst(Page)
	if shown, err := b.FirstAnswer(h.ID); err != nil || !strings.Contains(shown, "page=1/") {
		t.Fatal(shown, err)
	}
	if out := b.CallTool("hide_next", map[string]any{}); !strings.Contains(out, "page=2/") {
		t.Fatal(out)
	}
}
