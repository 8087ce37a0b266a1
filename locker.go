package relock

import "context"

// A Locker is a lock that can be taken and given back through a Lease:
// mutex.Mutex, reentrant.Mutex, fair.Mutex, and the two sides of an
// rwlock.RWMutex.
type Locker interface {
	// Lock waits until it acquires the lock or ctx ends. The caller must
	// Unlock the lease. ctx bounds only the wait.
	Lock(ctx context.Context) (*Lease, error)
	// TryLock makes one attempt and fails with ErrNotAcquired when the lock
	// is held by another owner.
	TryLock(ctx context.Context) (*Lease, error)
}
