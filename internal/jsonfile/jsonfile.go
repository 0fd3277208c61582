// Package jsonfile writes the results of the commands as indented JSON:
// to a stream, or to a file replaced atomically.
package jsonfile

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Print writes v to w as indented JSON and a newline.
func Print(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Write writes v as indented JSON to path, through a temporary file
// renamed over it, so a reader never sees half a file.
func Write(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
