package memberstate

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestJournalRecordBytesAsBefore: the record built in place (appendJournalRecord) is, byte for
// byte, the line the formatted encoding wrote (a journal written by either reads back in the
// other), for numbers at their limits and random ones, and appending after other records leaves
// them as they were.
func TestJournalRecordBytesAsBefore(t *testing.T) {
	formatted := func(epoch, seq uint64, o Owner, d Durable) []byte {
		body := journalPrefix + "epoch=" + strconv.FormatUint(epoch, 10) + " seq=" + strconv.FormatUint(seq, 10) +
			" group=" + o.Group + " id=" + o.SelfID + " term=" + strconv.FormatInt(d.Term, 10) + " voteFor=" + d.VoteFor
		return fmt.Appendf(nil, "%s crc=%08x\n", body, crc32.Checksum([]byte(body), crcTable))
	}
	r := rand.New(rand.NewPCG(29, 1))
	var buf, want []byte
	cases := []struct {
		epoch, seq uint64
		o          Owner
		d          Durable
	}{
		{0, 0, Owner{"g", "n0"}, Durable{}},
		{1<<64 - 1, 1<<64 - 1, Owner{"group-with-a-long-name", "n12"}, Durable{Term: 1<<63 - 1, VoteFor: "n12"}},
		{1, 2, Owner{"g", "a"}, Durable{Term: -1}},
	}
	for i := range 2000 {
		cases = append(cases, struct {
			epoch, seq uint64
			o          Owner
			d          Durable
		}{r.Uint64() >> r.IntN(64), r.Uint64() >> r.IntN(64), Owner{fmt.Sprintf("g%d", r.IntN(1e6)), fmt.Sprintf("n%d", i%7)},
			Durable{Term: r.Int64() >> r.IntN(63), VoteFor: []string{"", "n0", "n1", "node-7"}[r.IntN(4)]}})
	}
	for _, c := range cases {
		buf = appendJournalRecord(buf, c.epoch, c.seq, c.o, c.d)
		want = append(want, formatted(c.epoch, c.seq, c.o, c.d)...)
		if !bytes.Equal(buf, want) {
			t.Fatalf("record %+v: got\n%q\nwant\n%q", c, buf[max(0, len(buf)-200):], want[max(0, len(want)-200):])
		}
	}
}
