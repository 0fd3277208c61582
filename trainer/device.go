package trainer

// Device is one device a worker trains on: its name, as the worker's log
// and its slots call it ("cuda:1", "cpu:0"; empty for a worker's only
// device), and the backend that builds trainers there. A worker serves a
// number of run slots on each of its devices, and the slot a run's session
// takes decides the device its trainer lives on (worker.Slots).
type Device struct {
	Name    string
	Backend Backend
}
