package mq

import (
	"reflect"
	"sync"
	"unsafe"
)

// The SDK's client marks itself closed with a plain bool (rmqClient.close,
// written by Shutdown, read by InvokeSync; rocketmq-client-go
// internal/client.go, upstream pull request #1115 is still open). A
// rebalance that runs while a consumer shuts down (the one Start spawns, or
// one the broker asks for when another consumer of the group leaves) reads
// it unsynchronised: a data race the race detector reports and that can make
// the rebalance act on a closing client. Every rebalance of the SDK runs
// under the client's rbMutex, so Close holds that mutex around Shutdown: a
// rebalance under way finishes first, and one that starts later sees the
// client closed.

// rebalanceLock finds the SDK client's rbMutex behind a push consumer
// (*consumer.pushConsumer → *defaultConsumer → client → *internal.rmqClient),
// or nil when the SDK's layout is not the one this was written for (then
// Close shuts down without it, as before; TestRebalanceLockIsFound guards
// the SDK version in go.mod).
func rebalanceLock(pc any) *sync.Mutex {
	v := deref(reflect.ValueOf(pc))
	if v.Kind() != reflect.Struct {
		return nil
	}
	dc := deref(v.FieldByName("defaultConsumer"))
	if dc.Kind() != reflect.Struct {
		return nil
	}
	cl := deref(dc.FieldByName("client"))
	if cl.Kind() != reflect.Struct {
		return nil
	}
	mu := cl.FieldByName("rbMutex")
	if !mu.IsValid() || mu.Type() != reflect.TypeFor[sync.Mutex]() || !mu.CanAddr() {
		return nil
	}
	return (*sync.Mutex)(unsafe.Pointer(mu.UnsafeAddr())) // #nosec G103 -- the SDK's own mutex, type-checked above, locked only around Shutdown
}

// deref follows interfaces and pointers to what they hold (an invalid Value
// for a nil one).
func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}
