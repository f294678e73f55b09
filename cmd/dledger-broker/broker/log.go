package broker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Entry is one log entry: the term of the leader that appended it (its fencing token) and the
// client's value. An empty value is a leader's barrier entry (see Broker), never a client's.
type Entry struct {
	Term  int64  `json:"t"`
	Value string `json:"v"`
}

// Log is the durable, append-only log of one member: one JSON line per entry in log.jsonl, and
// the highest term this member has accepted appends from (its promise) in term. Every change is
// fsynced before the method returns, because the ledger end reported to the election member
// must never be ahead of what survives a kill -9.
type Log struct {
	dir     string
	f       *os.File
	entries []Entry
	offsets []int64 // offsets[i] is where entry i starts in the file
	size    int64
	term    int64 // the promise: appends from an older term are refused
	// fault, when set, runs before every write: a test seam for a stalled or full disk (it
	// sleeps, or returns the error the write would have).
	fault func() error
}

// OpenLog loads the log in dir, creating it empty. A torn last line (a crash during a write) is
// cut off: it was never fsynced as a whole, so it was never acknowledged or reported.
func OpenLog(dir string) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "log.jsonl"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, f: f}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a partial line without its newline is the torn write
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		var e Entry
		if jerr := json.Unmarshal(bytes.TrimSpace(line), &e); jerr != nil {
			break
		}
		l.entries = append(l.entries, e)
		l.offsets = append(l.offsets, l.size)
		l.size += int64(len(line))
	}
	if err := l.truncateFile(l.size); err != nil {
		f.Close()
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "term")); err == nil {
		l.term, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("term file: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		f.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// Len is the number of entries.
func (l *Log) Len() int64 { return int64(len(l.entries)) }

// At is entry i (0 <= i < Len).
func (l *Log) At(i int64) Entry { return l.entries[i] }

// TermAt is the term of entry i, or -1 for i = -1 (before the first entry).
func (l *Log) TermAt(i int64) int64 {
	if i < 0 {
		return -1
	}
	return l.entries[i].Term
}

// End is the ledger end as the election member compares it: the last entry's term and index,
// (-1, -1) when empty.
func (l *Log) End() (term, index int64) {
	n := l.Len()
	return l.TermAt(n - 1), n - 1
}

// Promised is the highest term this member accepted appends from, or led.
func (l *Log) Promised() int64 { return l.term }

// Promise raises the promise to term, durably (write a temp file, fsync, rename, fsync dir).
func (l *Log) Promise(term int64) error {
	if term <= l.term {
		return nil
	}
	if err := l.injected(); err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, "term.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strconv.FormatInt(term, 10) + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, "term")); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.term = term
	return nil
}

// Append writes entries at the end and fsyncs.
func (l *Log) Append(es ...Entry) error {
	var buf bytes.Buffer
	offs := make([]int64, 0, len(es))
	for _, e := range es {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		offs = append(offs, l.size+int64(buf.Len()))
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := l.injected(); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(buf.Bytes(), l.size); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		return err
	}
	l.entries = append(l.entries, es...)
	l.offsets = append(l.offsets, offs...)
	l.size += int64(buf.Len())
	return nil
}

// TruncateFrom removes entries i.. (a divergent suffix) and fsyncs.
func (l *Log) TruncateFrom(i int64) error {
	if i >= l.Len() {
		return nil
	}
	size := l.offsets[i]
	if err := l.injected(); err != nil {
		return err
	}
	if err := l.truncateFile(size); err != nil {
		return err
	}
	l.entries = l.entries[:i]
	l.offsets = l.offsets[:i]
	l.size = size
	return nil
}

func (l *Log) injected() error {
	if l.fault == nil {
		return nil
	}
	return l.fault()
}

func (l *Log) truncateFile(size int64) error {
	if err := l.f.Truncate(size); err != nil {
		return err
	}
	return l.f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
