// Package deploy holds the files the Docker Compose stack needs besides
// docker-compose.yml and the Dockerfile at the repository root: the Temporal
// set-up scripts and dynamic config, the PostgreSQL init script and the
// multi-GPU override. Its tests check those deployment files.
//
// TestComposeConfigValidates asks Docker Compose itself and skips where there
// is none; the other tests read the files and need no Docker.
package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.yaml.in/yaml/v3"

	"github.com/dqnflow/dqnflow/workflows"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// composeFile is the part of docker-compose.yml the tests look at.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       *build            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Profiles    []string          `yaml:"profiles"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Volumes     []string `yaml:"volumes"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Deploy struct {
		Resources struct {
			Reservations struct {
				Devices []struct {
					Driver       string   `yaml:"driver"`
					Count        any      `yaml:"count"`
					DeviceIDs    []string `yaml:"device_ids"`
					Capabilities []string `yaml:"capabilities"`
				} `yaml:"devices"`
			} `yaml:"reservations"`
		} `yaml:"resources"`
	} `yaml:"deploy"`
}

type build struct {
	Context string `yaml:"context"`
	Target  string `yaml:"target"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return f
}

// interpolated replaces ${VAR:-default} and ${VAR-default} by the default,
// as Compose does when VAR is unset.
var interpolation = regexp.MustCompile(`\$\{[A-Za-z0-9_]+:?-([^}]*)\}`)

func interpolated(s string) string { return interpolation.ReplaceAllString(s, "$1") }

// composeCommand finds a Docker Compose v2 or newer: the docker CLI plugin
// (`docker compose`) or the standalone `docker-compose`. The Python
// docker-compose 1.x is not accepted: it predates parts of the Compose
// Specification this file uses.
func composeCommand() ([]string, string) {
	var why []string
	for _, cand := range [][]string{{"docker", "compose"}, {"docker-compose"}} {
		if _, err := exec.LookPath(cand[0]); err != nil {
			why = append(why, fmt.Sprintf("%s: not found", cand[0]))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, cand[0], append(cand[1:], "version")...).CombinedOutput()
		cancel()
		name := strings.Join(cand, " ")
		switch {
		case err != nil:
			why = append(why, fmt.Sprintf("%s version: %v: %s", name, err, firstLine(out)))
		case !strings.Contains(string(out), "Docker Compose version"):
			why = append(why, fmt.Sprintf("%s is not Compose v2 or newer: %s", name, firstLine(out)))
		default:
			return cand, ""
		}
	}
	return nil, strings.Join(why, "; ")
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// TestComposeConfigValidates runs `docker compose config -q`: Compose's own
// parsing, interpolation and schema validation of docker-compose.yml, alone,
// with the cpu profile, and with the multi-GPU override.
func TestComposeConfigValidates(t *testing.T) {
	compose, why := composeCommand()
	if compose == nil {
		t.Skipf("no Docker Compose v2 here (%s); TestComposeHasTheRequiredServices checks the file without it", why)
	}
	for _, args := range [][]string{
		{"config", "-q"},
		{"--profile", "cpu", "config", "-q"},
		{"-f", "docker-compose.yml", "-f", "deploy/compose.multi-gpu.yml", "config", "-q"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, compose[0], append(compose[1:], args...)...)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("%s %s: %v\n%s", strings.Join(compose, " "), strings.Join(args, " "), err, out.String())
		}
	}
}

// TestComposeHasTheRequiredServices checks, without Docker, that
// docker-compose.yml has the stack DESIGN.md and issue 3 ask for and that
// the pieces are wired in the right order.
func TestComposeHasTheRequiredServices(t *testing.T) {
	f := readCompose(t)
	for _, name := range []string{
		"postgresql", "temporal-admin-tools", "temporal", "temporal-setup", "temporal-ui",
		"dqnflow-migrate", "dqnflow-control", "dqnflow-gpu", "s3", "s3-setup",
	} {
		s, ok := f.Services[name]
		if !ok {
			t.Errorf("service %s is missing", name)
			continue
		}
		if len(s.Profiles) > 0 {
			t.Errorf("service %s has profiles %v: `docker compose up` would leave it out", name, s.Profiles)
		}
	}

	// Every image is pinned, and none is the deprecated auto-setup image.
	for name, s := range f.Services {
		img := interpolated(s.Image)
		i := strings.LastIndex(img, ":")
		if img == "" || i < 0 || strings.Contains(img[i:], "/") || img[i+1:] == "latest" {
			t.Errorf("service %s: image %q is not pinned to a tag", name, s.Image)
		}
		if strings.HasPrefix(img, "temporalio/auto-setup") {
			t.Errorf("service %s uses temporalio/auto-setup, which Temporal deprecated", name)
		}
	}

	want := func(service, image string) {
		t.Helper()
		if got := interpolated(f.Services[service].Image); !strings.HasPrefix(got, image+":") {
			t.Errorf("service %s: image %q, want %s:<tag>", service, got, image)
		}
	}
	want("postgresql", "postgres")
	want("temporal-admin-tools", "temporalio/admin-tools")
	want("temporal", "temporalio/server")
	want("temporal-setup", "temporalio/admin-tools")
	want("temporal-ui", "temporalio/ui")
	if s := f.Services["postgresql"]; s.Healthcheck == nil || !strings.Contains(strings.Join(s.Healthcheck.Test, " "), "pg_isready") {
		t.Errorf("postgresql: want a pg_isready healthcheck, got %+v", s.Healthcheck)
	}
	if got := f.Services["temporal"].Environment["DB"]; got != "postgres12" {
		t.Errorf("temporal: DB=%q, want postgres12", got)
	}
	if got := f.Services["temporal-ui"].Environment["TEMPORAL_ADDRESS"]; got != "temporal:7233" {
		t.Errorf("temporal-ui: TEMPORAL_ADDRESS=%q, want temporal:7233", got)
	}

	// The start-up order.
	dependsOn := func(service, on, condition string) {
		t.Helper()
		d, ok := f.Services[service].DependsOn[on]
		if !ok {
			t.Errorf("service %s does not depend on %s", service, on)
		} else if d.Condition != condition {
			t.Errorf("service %s depends on %s with condition %q, want %s", service, on, d.Condition, condition)
		}
	}
	dependsOn("temporal-admin-tools", "postgresql", "service_healthy")
	dependsOn("temporal", "temporal-admin-tools", "service_completed_successfully")
	dependsOn("temporal-setup", "temporal", "service_started")
	dependsOn("dqnflow-migrate", "postgresql", "service_healthy")
	dependsOn("s3-setup", "s3", "service_started")
	for _, w := range []string{"dqnflow-control", "dqnflow-gpu", "dqnflow-cpu"} {
		dependsOn(w, "dqnflow-migrate", "service_completed_successfully")
		dependsOn(w, "temporal-setup", "service_completed_successfully")
		dependsOn(w, "s3-setup", "service_completed_successfully")
	}

	// The workers: built from the Dockerfile's targets, in their roles, on
	// the shared checkpoint bucket.
	role := func(service, target string, args ...string) {
		t.Helper()
		s := f.Services[service]
		if s.Build == nil || s.Build.Context != "." || s.Build.Target != target {
			t.Errorf("service %s: build %+v, want context . and target %s", service, s.Build, target)
		}
		if cmd := strings.Join(s.Command, " "); !strings.Contains(cmd, strings.Join(args, " ")) {
			t.Errorf("service %s: command %q, want it to contain %q", service, cmd, strings.Join(args, " "))
		}
	}
	role("dqnflow-migrate", "control", "migrate")
	role("dqnflow-control", "control", "worker", "--role", "control")
	role("dqnflow-gpu", "gpu", "worker", "--role", "gpu", "--device", "cuda")
	role("dqnflow-cpu", "control", "worker", "--role", "gpu", "--device", "cpu")
	role("s3", "s3")
	for _, w := range []string{"dqnflow-control", "dqnflow-gpu", "dqnflow-cpu"} {
		s := f.Services[w]
		store := interpolated(s.Environment["DQNFLOW_CHECKPOINT_STORE"])
		if !strings.HasPrefix(store, "s3://") || !strings.Contains(store, "endpoint=http://s3:7070") || strings.Contains(store, "@") {
			t.Errorf("service %s: DQNFLOW_CHECKPOINT_STORE=%q, want the s3 service's bucket (s3://…?endpoint=http://s3:7070, no credentials in the URL)", w, store)
		}
		// The one mount a worker has is the data root, read-only: price
		// files come from it (DQNFLOW_DATA_ROOTS), checkpoints live in the
		// bucket, so nothing a worker writes needs a shared volume.
		if len(s.Volumes) != 1 || !strings.HasSuffix(s.Volumes[0], ":/data:ro") {
			t.Errorf("service %s mounts %v: want only the data root, read-only at /data (the checkpoints live in the bucket)", w, s.Volumes)
		}
		if roots := interpolated(s.Environment["DQNFLOW_DATA_ROOTS"]); roots != "/data" {
			t.Errorf("service %s: DQNFLOW_DATA_ROOTS=%q, want /data, the mounted data root", w, roots)
		}
		for _, k := range []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if s.Environment[k] == "" {
				t.Errorf("service %s: %s is not set", w, k)
			}
		}
	}
	if s3 := f.Services["s3"]; s3.Environment["ROOT_ACCESS_KEY_ID"] != f.Services["dqnflow-gpu"].Environment["AWS_ACCESS_KEY_ID"] ||
		s3.Environment["ROOT_SECRET_ACCESS_KEY"] != f.Services["dqnflow-gpu"].Environment["AWS_SECRET_ACCESS_KEY"] {
		t.Error("the s3 service's root credentials are not the ones the workers use")
	}
	if _, ok := f.Volumes["s3-data"]; !ok {
		t.Error("the named volume s3-data (the bucket's objects) is not declared")
	}

	// The GPU worker reserves an NVIDIA GPU.
	devs := f.Services["dqnflow-gpu"].Deploy.Resources.Reservations.Devices
	ok := false
	for _, d := range devs {
		if d.Driver == "nvidia" && slices.Contains(d.Capabilities, "gpu") && (d.Count != nil || len(d.DeviceIDs) > 0) {
			ok = true
		}
	}
	if !ok {
		t.Errorf("dqnflow-gpu: want deploy.resources.reservations.devices with driver nvidia, capabilities [gpu] and a count or device_ids; got %+v", devs)
	}
	if devs := f.Services["dqnflow-control"].Deploy.Resources.Reservations.Devices; len(devs) > 0 {
		t.Errorf("dqnflow-control reserves devices %+v; it needs none", devs)
	}

	// What the services mount from the repository exists.
	for name, s := range f.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, src)); err != nil {
				t.Errorf("service %s mounts %s: %v", name, src, err)
			}
		}
		deployDir := "" // the repository folder mounted at /dqnflow-deploy
		for _, v := range s.Volumes {
			if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, "/dqnflow-deploy") {
				deployDir = src
			}
		}
		for _, arg := range s.Entrypoint {
			if rest, ok := strings.CutPrefix(arg, "/dqnflow-deploy/"); ok {
				if _, err := os.Stat(filepath.Join(root, deployDir, rest)); deployDir == "" || err != nil {
					t.Errorf("service %s runs %s from %q: %v", name, arg, deployDir, err)
				}
			}
		}
	}
	if p := f.Services["temporal"].Environment["DYNAMIC_CONFIG_FILE_PATH"]; p != "" {
		rest, ok := strings.CutPrefix(p, "/etc/temporal/config/dynamicconfig/")
		if _, err := os.Stat(filepath.Join(root, "deploy", "temporal", "dynamicconfig", rest)); !ok || err != nil {
			t.Errorf("temporal: DYNAMIC_CONFIG_FILE_PATH=%s is not a file of deploy/temporal/dynamicconfig", p)
		}
	}
}

// dockerfileStage is one FROM of the Dockerfile with the lines that follow it.
type dockerfileStage struct {
	Base  string // after ARG defaults are filled in
	Lines []string
}

func readDockerfile(t *testing.T) map[string]dockerfileStage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]string{}
	stages := map[string]dockerfileStage{}
	cur := ""
	for line := range strings.Lines(strings.ReplaceAll(string(b), "\\\n", " ")) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "ARG":
			if k, v, ok := strings.Cut(f[1], "="); ok && cur == "" {
				args[k] = v
			}
		case "FROM":
			if len(f) != 4 || !strings.EqualFold(f[2], "AS") {
				t.Fatalf("Dockerfile: %q: want FROM <image> AS <name>", strings.TrimSpace(line))
			}
			base := regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(f[1], func(m string) string {
				return args[m[2:len(m)-1]]
			})
			cur = f[3]
			stages[cur] = dockerfileStage{Base: base}
			continue
		}
		if cur != "" {
			s := stages[cur]
			s.Lines = append(s.Lines, strings.TrimSpace(line))
			stages[cur] = s
		}
	}
	return stages
}

// TestDockerfileHasControlAndGPUTargets checks the Dockerfile's stages: a Go
// build of the static binary, and the control and gpu targets the compose
// file builds, both running the binary as a non-root user.
func TestDockerfileHasControlAndGPUTargets(t *testing.T) {
	stages := readDockerfile(t)
	b, ok := stages["build"]
	if !ok {
		t.Fatalf("Dockerfile: no build stage; stages %v", stages)
	}
	if !strings.HasPrefix(b.Base, "golang:1.26") {
		t.Errorf("build stage from %q, want golang:1.26 (go.mod says go 1.26)", b.Base)
	}
	all := strings.Join(b.Lines, "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/dqnflow"} {
		if !strings.Contains(all, want) {
			t.Errorf("build stage lacks %q", want)
		}
	}
	for name, base := range map[string]string{"control": "debian:", "gpu": "nvidia/cuda:13."} {
		s, ok := stages[name]
		if !ok {
			t.Errorf("Dockerfile: no %s target", name)
			continue
		}
		if !strings.HasPrefix(s.Base, base) {
			t.Errorf("%s target from %q, want %s…", name, s.Base, base)
		}
		all := strings.Join(s.Lines, "\n")
		if !strings.Contains(all, "COPY --from=build /out/dqnflow ") {
			t.Errorf("%s target does not copy the binary from the build stage", name)
		}
		if !strings.Contains(all, `ENTRYPOINT ["/usr/local/bin/dqnflow"]`) {
			t.Errorf("%s target: the entrypoint is not the dqnflow binary", name)
		}
		user := ""
		for _, l := range s.Lines {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "USER" {
				user = f[1]
			}
		}
		if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
			t.Errorf("%s target runs as %q, want a non-root user", name, user)
		}
	}
	// The s3 target: versitygw built from the pinned module, as a non-root user.
	if s3, ok := stages["s3"]; !ok {
		t.Error("Dockerfile: no s3 target (versitygw for the compose file's s3 service)")
	} else {
		all := strings.Join(append(stages["s3-build"].Lines, s3.Lines...), "\n")
		for _, want := range []string{"COPY tools/versitygw/", "github.com/versity/versitygw/cmd/versitygw", "CGO_ENABLED=0",
			`ENTRYPOINT ["/usr/local/bin/versitygw"]`, "USER 10001:10001", "--sidecar"} {
			if !strings.Contains(all, want) {
				t.Errorf("s3 target lacks %q", want)
			}
		}
	}
	if gpu := stages["gpu"]; !strings.Contains(gpu.Base, "-runtime-") {
		t.Errorf("gpu target from %q, want a CUDA runtime image (NVRTC and cuBLAS, no toolkit)", gpu.Base)
	} else if all := strings.Join(gpu.Lines, "\n"); !strings.Contains(all, "NVIDIA_DRIVER_CAPABILITIES=compute,utility") {
		t.Error("gpu target does not set NVIDIA_DRIVER_CAPABILITIES=compute,utility")
	}
}

// TestSetupScripts checks the shell scripts the stack runs: their syntax
// (sh -n), and that the namespace job registers exactly the search
// attributes the workflows upsert, with their types.
func TestSetupScripts(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join("*", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("*", "*", "*.sh"))
	scripts = append(scripts, more...)
	if len(scripts) < 3 {
		t.Fatalf("found only the scripts %v", scripts)
	}
	if sh, err := exec.LookPath("sh"); err != nil {
		t.Logf("no sh here, syntax not checked: %v", err)
	} else {
		for _, s := range scripts {
			if out, err := exec.Command(sh, "-n", s).CombinedOutput(); err != nil {
				t.Errorf("sh -n %s: %v\n%s", s, err, out)
			}
		}
	}

	b, err := os.ReadFile(filepath.Join("temporal", "setup-namespace.sh"))
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]string{}
	for _, m := range regexp.MustCompile(`--name\s+(\w+)\s+--type\s+(\w+)`).FindAllStringSubmatch(string(b), -1) {
		registered[m[1]] = m[2]
	}
	cliType := map[enumspb.IndexedValueType]string{
		enumspb.INDEXED_VALUE_TYPE_INT:          "Int",
		enumspb.INDEXED_VALUE_TYPE_DOUBLE:       "Double",
		enumspb.INDEXED_VALUE_TYPE_KEYWORD:      "Keyword",
		enumspb.INDEXED_VALUE_TYPE_TEXT:         "Text",
		enumspb.INDEXED_VALUE_TYPE_BOOL:         "Bool",
		enumspb.INDEXED_VALUE_TYPE_DATETIME:     "Datetime",
		enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST: "KeywordList",
	}
	for name, typ := range workflows.SearchAttributes {
		if got, want := registered[name], cliType[typ]; got != want {
			t.Errorf("setup-namespace.sh registers %s as %q; the workflows need %q", name, got, want)
		}
	}
	for name := range registered {
		if _, ok := workflows.SearchAttributes[name]; !ok {
			t.Errorf("setup-namespace.sh registers %s, which the workflows do not use", name)
		}
		if !regexp.MustCompile(`for name in [^\n]*\b` + name + `\b`).Match(b) {
			t.Errorf("setup-namespace.sh does not wait for %s to be listed", name)
		}
	}
	if len(registered) == 0 {
		t.Error("setup-namespace.sh registers no search attributes")
	}
}

// TestWorkersServeMetricsToTheComposeNetwork: every dqnflow worker of the
// stack serves Prometheus metrics at an address that names every
// interface of its container (0.0.0.0 or [::]), since a bare ":PORT"
// binds the loopback interface only (worker.Metrics.Serve) and a
// Prometheus on the compose network could not scrape it; and none
// publishes that port on the host, where it would be open without
// authentication.
func TestWorkersServeMetricsToTheComposeNetwork(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
			Ports   []string `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"dqnflow-control", "dqnflow-gpu", "dqnflow-cpu"} {
		s := f.Services[w]
		i := slices.Index(s.Command, "--metrics-addr")
		if i < 0 || i+1 >= len(s.Command) {
			t.Errorf("service %s: command %q serves no metrics", w, s.Command)
			continue
		}
		addr := s.Command[i+1]
		if !strings.HasPrefix(addr, "0.0.0.0:") && !strings.HasPrefix(addr, "[::]:") {
			t.Errorf("service %s: --metrics-addr %s: want 0.0.0.0:PORT or [::]:PORT, so that the compose network reaches it", w, addr)
		}
		_, port, _ := strings.Cut(addr, "]:")
		if port == "" {
			_, port, _ = strings.Cut(addr, ":")
		}
		for _, p := range s.Ports {
			if strings.HasSuffix(p, ":"+port) {
				t.Errorf("service %s publishes its metrics port on the host: %s", w, p)
			}
		}
	}
}
