package rpc

import (
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// frameBuf is a pooled encode buffer with its own msgpack encoder. Frames are encoded into
// one, written, and returned to the pool, so a steady stream of heartbeats allocates neither
// buffers nor encoders.
type frameBuf struct {
	b []byte
	// enc writes into b through frameBuf's Write and WriteByte: no bytes.Buffer in between,
	// and no copy of the frame. It is configured once, when the buffer is created.
	enc *msgpack.Encoder
}

const (
	frameBufInitial = 256
	// frameBufKeep is the largest buffer worth pooling; a rare big frame is left to the GC
	// rather than pinning its memory in the pool.
	frameBufKeep = 4 << 10
)

// framePool holds *frameBuf. It has no New function (that would make an initialization
// cycle through putFrameBuf); getFrameBuf makes a buffer when the pool is empty.
var framePool sync.Pool

func getFrameBuf() *frameBuf {
	if fb, ok := framePool.Get().(*frameBuf); ok {
		return fb
	}
	return newFrameBuf()
}

func newFrameBuf() *frameBuf {
	fb := &frameBuf{b: make([]byte, 0, frameBufInitial)}
	fb.enc = msgpack.NewEncoder(fb)
	// Integers in their smallest form, as the msgpack spec recommends, other implementations
	// write them and members before this codec wrote them. Without this the library writes
	// every int64 field in 9 bytes; either form decodes the same.
	fb.enc.UseCompactInts(true)
	return fb
}

func putFrameBuf(fb *frameBuf) {
	if cap(fb.b) > frameBufKeep {
		return
	}
	fb.b = fb.b[:0]
	framePool.Put(fb)
}

// Write and WriteByte make frameBuf the encoder's writer (the library uses WriteByte when
// the writer has it). Appending to memory never fails.
func (fb *frameBuf) Write(p []byte) (int, error) {
	fb.b = append(fb.b, p...)
	return len(p), nil
}

func (fb *frameBuf) WriteByte(c byte) error {
	fb.b = append(fb.b, c)
	return nil
}
