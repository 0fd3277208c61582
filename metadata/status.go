package metadata

// Status is the state of a run. Its values are the strings the runs table
// holds and the workflows' recorded histories carry as JSON: renaming one
// breaks the replay of every recorded run.
type Status string

// Run statuses. Running and Paused are live; the others are terminal.
const (
	StatusRunning      Status = "running"
	StatusPaused       Status = "paused"
	StatusCompleted    Status = "completed"     // trained every epoch
	StatusStopped      Status = "stopped"       // stop signal: final checkpoint and backtest, then done
	StatusEarlyStopped Status = "early_stopped" // validation Sharpe stopped improving
	StatusFailed       Status = "failed"
	StatusCanceled     Status = "canceled"
)

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusRunning, StatusPaused, StatusCompleted, StatusStopped, StatusEarlyStopped, StatusFailed, StatusCanceled:
		return true
	}
	return false
}

// Terminal reports whether a run with status s has finished.
func (s Status) Terminal() bool { return s.Valid() && s != StatusRunning && s != StatusPaused }
