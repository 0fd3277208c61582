package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/mod/sumdb/dirhash"
)

// download fetches module@version into the module cache with the go
// command, so that GOPROXY, GONOSUMDB, GOFLAGS and the checksum database
// apply to it as to any dependency, and returns the path of its zip after
// checking that the zip's hash is wantSum. The go command runs in an empty
// directory: the download must not depend on, nor change, any go.mod.
func download(ctx context.Context, goCmd, module, version, wantSum string) (zipPath string, err error) {
	mv := module + "@" + version
	dir, err := os.MkdirTemp("", "localdb-download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)

	cmd := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", mv)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	// On failure the go command still prints the JSON object, with Error
	// set; that message is the one to show.
	var got struct {
		Version string
		Zip     string
		Sum     string
		Error   string
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		if runErr != nil {
			return "", fmt.Errorf("go mod download %s: %v: %s", mv, runErr, bytes.TrimSpace(stderr.Bytes()))
		}
		return "", fmt.Errorf("go mod download %s: reading its JSON output: %w", mv, err)
	}
	switch {
	case got.Error != "":
		return "", fmt.Errorf("go mod download %s: %s", mv, got.Error)
	case runErr != nil:
		return "", fmt.Errorf("go mod download %s: %v: %s", mv, runErr, bytes.TrimSpace(stderr.Bytes()))
	case got.Version != version:
		return "", fmt.Errorf("go mod download %s: got version %s", mv, got.Version)
	case got.Zip == "":
		return "", fmt.Errorf("go mod download %s: no zip in its output", mv)
	}

	// The go command verified the zip against go.sum or the checksum
	// database when it was downloaded; hashing the bytes we are about to
	// read again ties them to the pin, whatever GONOSUMDB or the cache say.
	sum, err := dirhash.HashZip(got.Zip, dirhash.Hash1)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", got.Zip, err)
	}
	if sum != wantSum {
		return "", fmt.Errorf("%s: the module zip %s hashes to %s, the pin says %s: refusing data other than the pinned", mv, got.Zip, sum, wantSum)
	}
	return got.Zip, nil
}
