package rpc

import (
	"sync"

	"github.com/panjf2000/gnet/v2"
)

// frameBuf is a pooled encode buffer. Frames are encoded into one, written, and returned to
// the pool, so a steady stream of heartbeats does not allocate buffers.
type frameBuf struct {
	b []byte
	// written is fb's gnet write callback, bound once when the buffer is created: binding a
	// method value per write would allocate a closure each time.
	written gnet.AsyncCallback
}

const (
	frameBufInitial = 256
	// frameBufKeep is the largest buffer worth pooling; a rare big frame is left to the GC
	// rather than pinning its memory in the pool.
	frameBufKeep = 4 << 10
)

var framePool sync.Pool // of *frameBuf; New is set in init to break an initialization cycle

func init() {
	framePool.New = func() any {
		fb := &frameBuf{b: make([]byte, 0, frameBufInitial)}
		fb.written = func(gnet.Conn, error) error {
			putFrameBuf(fb)
			return nil
		}
		return fb
	}
}

func getFrameBuf() *frameBuf { return framePool.Get().(*frameBuf) }

func putFrameBuf(fb *frameBuf) {
	if cap(fb.b) > frameBufKeep {
		return
	}
	fb.b = fb.b[:0]
	framePool.Put(fb)
}
