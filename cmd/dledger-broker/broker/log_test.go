package broker

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLogSurvivesReopen: entries, truncation and the promise are what a reopen finds.
func TestLogSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if term, idx := l.End(); term != -1 || idx != -1 {
		t.Fatalf("empty log end = (%d, %d), want (-1, -1)", term, idx)
	}
	must(t, l.Append(Entry{Term: 1, Value: "a"}, Entry{Term: 1, Value: "b"}, Entry{Term: 2, Value: "c"}))
	must(t, l.TruncateFrom(2))
	must(t, l.Append(Entry{Term: 3, Value: "d"}))
	must(t, l.Promise(3))
	must(t, l.Promise(2)) // never lowers
	l.Close()

	l, err = OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Len() != 3 || l.At(2) != (Entry{Term: 3, Value: "d"}) || l.At(1).Value != "b" {
		t.Fatalf("reopened log: %v", l.entries)
	}
	if l.Promised() != 3 {
		t.Fatalf("promise = %d, want 3", l.Promised())
	}
	if term, idx := l.End(); term != 3 || idx != 2 {
		t.Fatalf("end = (%d, %d), want (3, 2)", term, idx)
	}
}

// TestLogDropsTornWrite: a crash mid-write leaves a partial last line; it was never fsynced
// whole, so never acknowledged or reported, and a reopen cuts it off.
func TestLogDropsTornWrite(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	must(t, l.Append(Entry{Term: 1, Value: "a"}))
	l.Close()
	f, err := os.OpenFile(filepath.Join(dir, "log.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"t":1,"v":"torn`)
	f.Close()
	l, err = OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 {
		t.Fatalf("len = %d, want 1 (the torn line dropped)", l.Len())
	}
	must(t, l.Append(Entry{Term: 1, Value: "b"}))
	l.Close()
	l, err = OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Len() != 2 || l.At(1).Value != "b" {
		t.Fatalf("after append over the torn tail: %v", l.entries)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
