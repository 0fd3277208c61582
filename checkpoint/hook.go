package checkpoint

import "context"

// WritePoint names a point inside a directory store's write (Store.Hook).
type WritePoint string

// The points of a write at which Store.Hook is called, in order.
const (
	// TempSynced: the temporary file holds every byte, fsynced and
	// closed; the final name is untouched (absent, or the previous file).
	TempSynced WritePoint = "temp-synced"
	// Renamed: the file is in place under its final name and the
	// directory is fsynced; Write has not returned, so its caller has not
	// recorded the file anywhere yet.
	Renamed WritePoint = "renamed"
)

// WriteHook is called at each WritePoint of a write with the file the
// point concerns (the temporary file, then the final one). An error ends
// the write there as a failed write would: before the rename the
// temporary file is removed; after it the file stays and Write returns
// the error. The fault-injection tests set one (trainer/faults), to kill
// a worker at an exact point of a write.
type WriteHook func(ctx context.Context, at WritePoint, file string) error
