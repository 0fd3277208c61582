package checkpoint

import (
	"errors"
	"fmt"

	"github.com/dqnflow/dqnflow/files"
)

// ErrOutsideRoot is wrapped by errors about a checkpoint path that leads
// out of the configured checkpoint root.
var ErrOutsideRoot = errors.New("outside the checkpoint root")

// Confine returns the absolute form of path (relative paths are taken
// relative to root) if it lies inside root, and an error wrapping
// ErrOutsideRoot otherwise: files.Confine, the project's one confinement
// rule (lexically, and physically with every symbolic link resolved), with
// errors that say it is a checkpoint path.
func Confine(root, path string) (string, error) {
	p, err := files.Confine(root, path)
	var out *files.OutsideError
	switch {
	case errors.As(err, &out):
		return "", fmt.Errorf("checkpoint path %s: %s%w %s", path, out.Via(), ErrOutsideRoot, out.Roots[0])
	case err != nil:
		return "", fmt.Errorf("checkpoint %w", err)
	}
	return p, nil
}
