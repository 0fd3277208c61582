package device

import (
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// Capture records launches on stream s as one CUDA graph and instantiates
// it; dependent as for captureFork.
func Capture(c *cuda.Ctx, dependent bool, s cuda.Stream, launches []Launch) (cuda.GraphExec, error) {
	if err := c.BeginCapture(s); err != nil {
		return 0, err
	}
	var runErr error
	for i := range launches {
		if runErr = launches[i].RunIn(c, s, dependent); runErr != nil {
			break
		}
	}
	return EndCapture(c, s, runErr)
}

// EndCapture ends the capture on s and instantiates its graph, or returns
// runErr, the error of queuing its work, when there is one.
func EndCapture(c *cuda.Ctx, s cuda.Stream, runErr error) (cuda.GraphExec, error) {
	g, err := c.EndCapture(s)
	if runErr != nil {
		return 0, runErr
	}
	if err != nil {
		return 0, err
	}
	x, err := c.Instantiate(g)
	if derr := c.DestroyGraph(g); err == nil {
		err = derr
	}
	return x, err
}
