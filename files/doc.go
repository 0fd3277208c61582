// Package files opens the files dqnflow reads on behalf of someone else's
// input: a path is confined to its roots (Confine, Roots), symbolic links
// resolved before the check, and a read is of a regular file only, bounded
// in size (Open, ReadFile). Checkpoints (package checkpoint) and price data
// (prices.Source) are confined with it; config, key and certificate files
// are read with ReadFile.
//
// Confinement guards against a run config, a workflow input or a database
// row naming a file outside the roots. It does not guard against a local
// user who can change the directory tree between the check and the use:
// keep the roots writable by their owners only.
package files
