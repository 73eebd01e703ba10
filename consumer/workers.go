package consumer

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
)

// workerSet knows the goroutines of the partition workers, which run user
// code (handlers, deserializers, Config.Skip). Run waits for them, so Close,
// which waits for Run, must not wait when one of them calls it. Go has no
// goroutine-local state; the goroutine id read from runtime.Stack is the one
// reliable identity, and it is read only when a worker starts and in Close.
type workerSet struct{ ids sync.Map }

// enter registers the calling goroutine as a worker and returns the
// function that removes it.
func (w *workerSet) enter() func() {
	id := goid()
	w.ids.Store(id, struct{}{})
	return func() { w.ids.Delete(id) }
}

// isWorker reports whether the calling goroutine is a worker.
func (w *workerSet) isWorker() bool {
	_, ok := w.ids.Load(goid())
	return ok
}

// goid returns the id of the calling goroutine, from the first line of its
// stack trace: "goroutine 123 [running]:".
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
