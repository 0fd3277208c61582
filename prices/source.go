package prices

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/files"
)

// EnvDataRoots is the environment variable that lists the data roots of a
// process started without --data-root, separated by the OS's list
// separator (":" on Unix, ";" on Windows). NewSource is the one place it
// is read.
const EnvDataRoots = "DQNFLOW_DATA_ROOTS"

// SyntheticPath is the data.path value that selects the seeded synthetic
// series (market.Synthetic) instead of a file: no file is read for it.
const SyntheticPath = "synthetic"

// addRoot says, in an error about a file outside the data roots, how to
// make it readable.
var addRoot = fmt.Sprintf("to read it, add its directory to the data roots: flag --data-root DIR (repeatable) of the worker, dev or the command, or $%s (a %q-separated list)",
	EnvDataRoots, string(os.PathListSeparator))

// Source is where a process reads price files from and what one read may
// cost: every worker and command that loads data loads it through one
// (market.Prepare, market.Load, Bars), so all follow the same rule
// (docs/adr/0029-data-roots-and-bounded-reads.md):
//
//   - a file on disk is read only when Roots holds it (files.Roots: links
//     resolved first), and only when it is a regular file within Limits;
//   - "bundled:NAME" (package data) and "synthetic" are always readable.
//
// The zero Source reads from the working directory, with the default
// limits.
type Source struct {
	// Roots are the data roots; empty means the working directory.
	Roots files.Roots
	// Limits bound each read; zero fields take the defaults.
	Limits Limits
}

// NewSource is the Source of a process: the data roots named by
// rootFlags (each may itself be a list, as in EnvDataRoots), else by
// $DQNFLOW_DATA_ROOTS, else the working directory; and the limits that
// limits writes (ParseLimits). Every root must be an existing directory.
func NewSource(rootFlags []string, limits string) (Source, error) {
	var dirs []string
	for _, f := range rootFlags {
		dirs = append(dirs, filepath.SplitList(f)...)
	}
	from := "flag --data-root"
	if len(dirs) == 0 {
		dirs, from = filepath.SplitList(os.Getenv(EnvDataRoots)), "$"+EnvDataRoots
	}
	dirs = slices.DeleteFunc(dirs, func(d string) bool { return strings.TrimSpace(d) == "" })
	if len(dirs) == 0 {
		dirs, from = []string{"."}, "the default data root (the working directory)"
	}
	roots, err := files.NewRoots(dirs...)
	if err != nil {
		return Source{}, fmt.Errorf("%s: data %w", from, err)
	}
	lim, err := ParseLimits(limits)
	if err != nil {
		return Source{}, fmt.Errorf("flag --data-limits: %w", err)
	}
	return Source{Roots: roots, Limits: lim}, nil
}

// roots is s.Roots, or the working directory when it holds none.
func (s Source) roots() files.Roots {
	if !s.Roots.Empty() {
		return s.Roots
	}
	r, err := files.NewRoots(".")
	if err != nil {
		return files.Roots{} // no working directory: nothing is inside
	}
	return r
}

// Allow returns s with the file at path readable too, wherever it lies: a
// data path the user typed on the command line of a local command is a
// file they chose to read with their own rights (ADR 0029); one that a
// config file, a workflow input or a database row names is not. The
// LEAN factor files beside it (factor_files/*.csv, LeanFactorPath) become
// readable with it. Bundled and synthetic paths need nothing.
func (s Source) Allow(path string) (Source, error) {
	if path == "" || path == SyntheticPath || data.IsBundled(path) {
		return s, nil
	}
	r, err := s.roots().WithFile(path)
	if err != nil {
		return s, fmt.Errorf("data %w", err)
	}
	// A LEAN equity zip is read with its factor file, beside it.
	for _, p := range leanCompanions(path) {
		if r, err = r.WithFile(p); err != nil {
			return s, fmt.Errorf("data %w", err)
		}
	}
	s.Roots = r
	return s, nil
}

// Describe says what s reads, for a process's start-up line.
func (s Source) Describe() string {
	return fmt.Sprintf("data roots %s, limits %s", strings.Join(s.roots().List(), ", "), s.Limits)
}

// DataPath is a price file a run config names, with the config field that
// names it.
type DataPath struct {
	Field, Path string
}

// DataPaths lists every price file cfg names: data.path, or every file
// of data.series (ParseSeries) when that is set, each named by its field
// and series ("data.series (EURUSD_H4)"); none for the synthetic series.
// A data.series that ParseSeries refuses is the error.
func DataPaths(cfg config.RunConfig) ([]DataPath, error) {
	if cfg.Data.Series != "" {
		specs, err := ParseSeries(cfg.Data.Series)
		if err != nil {
			return nil, fmt.Errorf("config data.series: %w", err)
		}
		var out []DataPath
		for _, sp := range specs {
			if sp.Path != SyntheticPath {
				out = append(out, DataPath{Field: "data.series (" + sp.Name + ")", Path: sp.Path})
			}
		}
		return out, nil
	}
	if cfg.Data.Path == SyntheticPath {
		return nil, nil
	}
	return []DataPath{{Field: "data.path", Path: cfg.Data.Path}}, nil
}

// Check makes sure that every price file cfg names can be read from s,
// without reading more than its first bytes: inside the roots, a regular
// file within the size limit; unless it is a zip or Parquet file (Format),
// not UTF-16 or UTF-32 and no NUL byte at its start; a bundled name must
// exist. Runs check this before any training,
// so that a config naming a file out of reach fails at once. Errors name
// the field ("config data.path: ...").
func (s Source) Check(cfg config.RunConfig) error {
	dps, err := DataPaths(cfg)
	if err != nil {
		return err
	}
	for _, dp := range dps {
		if err := s.check(dp.Path); err != nil {
			return fmt.Errorf("config %s: %w", dp.Field, err)
		}
	}
	return nil
}

func (s Source) check(path string) error {
	if data.IsBundled(path) {
		_, err := data.Open(path)
		return err
	}
	f, err := s.open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head, err := io.ReadAll(io.LimitReader(f, 4096)) // a /proc file fails here
	if err != nil {
		return readError(path, err)
	}
	if knownBinary(head) {
		return nil // a LEAN zip or a Parquet file: its reader checks it
	}
	if err := checkEncoding(path, head); err != nil {
		return err
	}
	if i := bytes.IndexByte(head, 0); i >= 0 {
		start := bytes.LastIndexByte(head[:i], '\n') + 1
		end := len(head)
		if j := bytes.IndexByte(head[i:], '\n'); j >= 0 {
			end = i + j
		}
		return nulError(path, bytes.Count(head[:i], []byte("\n"))+1, head[start:end], i-start)
	}
	return nil
}

// Bars loads the price file named by path: "bundled:NAME" for a file
// bundled in the binary (package data), anything else a file inside s's
// roots, within s.Limits. The format is found from the file's first
// bytes, not its name (Format): a LEAN zip, Parquet, or tab- or
// comma-separated text with or without a header; Bars.Origin says which.
// It returns every bar of the file or an error (a *ParseError naming the
// file, line or row, column and reason), never part of a file.
func (s Source) Bars(ctx context.Context, path string) (*Bars, error) {
	if data.IsBundled(path) {
		raw, err := data.Open(path)
		if err != nil {
			return nil, fmt.Errorf("load bars: %w", err)
		}
		return s.decode(ctx, path, bytes.NewReader(raw))
	}
	f, err := s.open(path)
	if err != nil {
		return nil, fmt.Errorf("load bars: %w", err)
	}
	defer f.Close()
	return s.decode(ctx, path, f)
}

// Digest is the hex SHA-256 of the file path names, read as Bars reads it
// (inside s's roots, within s.Limits; "bundled:NAME" the bundled bytes),
// and "" for the synthetic series, which its seed makes. A panel run's
// checkpoint records it for every series (market.Panel.Meta), so that a later
// evaluation notices a changed file (market.CheckPanel).
func (s Source) Digest(ctx context.Context, path string) (string, error) {
	h := sha256.New()
	switch {
	case path == SyntheticPath:
		return "", nil
	case data.IsBundled(path):
		raw, err := data.Open(path)
		if err != nil {
			return "", fmt.Errorf("digest: %w", err)
		}
		h.Write(raw)
	default:
		f, err := s.open(path)
		if err != nil {
			return "", fmt.Errorf("digest: %w", err)
		}
		defer f.Close()
		if _, err := io.Copy(h, readerCtx{ctx, f}); err != nil {
			return "", readError(path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readerCtx is r that stops with ctx's error once ctx ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// open opens the regular file path names inside s's roots, within
// s.Limits.MaxBytes; its errors say how to lift the bound they hit.
func (s Source) open(path string) (*files.File, error) {
	f, err := s.roots().Open(path, s.Limits.withDefaults().MaxBytes)
	switch {
	case errors.Is(err, files.ErrOutsideRoot):
		return nil, fmt.Errorf("data %w; %s", err, addRoot)
	case errors.Is(err, files.ErrTooLarge):
		return nil, fmt.Errorf("%w (data limit bytes; --data-limits raises it)", err)
	}
	return f, err
}
