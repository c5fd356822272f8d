package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// parseOnly parses args (without the program name) with rftpipe's own
// flag parser, the actions replaced: an error is a command line rftpipe
// refuses. It returns the parsed shard settings.
func parseOnly(t *testing.T, args []string) (shards, shard int) {
	t.Helper()
	app := newApp()
	ran := false
	for _, c := range app.Commands {
		c.Action = func(c *cli.Context) error {
			ran = true
			shards, shard = c.Int("shards"), c.Int("shard")
			if c.NArg() > 0 {
				t.Errorf("%v: stray arguments %v", args, c.Args().Slice())
			}
			return nil
		}
		c.Before = nil
	}
	if err := app.Run(interspersed(app, append([]string{"rftpipe"}, args...))); err != nil || !ran {
		t.Fatalf("%v: %v", args, err)
	}
	return shards, shard
}

// TestDeployFiles: the Kubernetes manifest parses as an Indexed Job whose
// completions equal its --shards, the Slurm script's array matches its
// --shards, and both command lines are ones rftpipe accepts, reading and
// writing object storage (s3://), the pods' credentials from a Secret.
func TestDeployFiles(t *testing.T) {
	b, err := os.ReadFile("deploy/indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Kind string
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int
			Template       struct {
				Spec struct {
					Containers []struct {
						Command, Args []string
						EnvFrom       []struct {
							SecretRef struct{ Name string } `yaml:"secretRef"`
						} `yaml:"envFrom"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &job); err != nil {
		t.Fatal(err)
	}
	if job.Kind != "Job" || job.Spec.CompletionMode != "Indexed" || len(job.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("not an Indexed Job: %+v", job)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "rftpipe" {
		t.Fatalf("command %v", c.Command)
	}
	if n, _ := parseOnly(t, c.Args); n != job.Spec.Completions {
		t.Errorf("--shards %d, completions %d", n, job.Spec.Completions)
	}
	checkObjectStorage(t, "the manifest", c.Args)
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name == "" {
		t.Errorf("the manifest's credentials come from no Secret: %+v", c.EnvFrom)
	}

	b, err = os.ReadFile("deploy/slurm-array.sh")
	if err != nil {
		t.Fatal(err)
	}
	var line, array string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "#SBATCH --array="); ok {
			array = v
		}
		if strings.HasPrefix(l, "rftpipe ") {
			line = l
		}
	}
	if array != "0-7" || line == "" {
		t.Fatalf("array %q, command %q", array, line)
	}
	line = strings.ReplaceAll(line, `"$SLURM_ARRAY_TASK_ID"`, "7")
	if n, i := parseOnly(t, strings.Fields(line)[1:]); n != 8 || i != 7 {
		t.Errorf("--shards %d --shard %d", n, i)
	}
	checkObjectStorage(t, "the Slurm script", strings.Fields(line))
}

// checkObjectStorage: the command line's --in and --out are s3:// URLs.
func checkObjectStorage(t *testing.T, what string, args []string) {
	t.Helper()
	for _, flag := range []string{"--in", "--out"} {
		i := slices.Index(args, flag)
		if i < 0 || i+1 == len(args) || !strings.HasPrefix(args[i+1], "s3://") {
			t.Errorf("%s: %s is not in object storage: %v", what, flag, args)
		}
	}
}

// TestDeployImageIsBuilt: the image the Kubernetes manifest runs is the one
// `make image` builds from the Dockerfile, which builds rftpipe with cgo on
// (DuckDB) and runs it.
func TestDeployImageIsBuilt(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	manifest, makefile, dockerfile := read("deploy/indexed-job.yaml"), read("../../Makefile"), read("../../Dockerfile")
	var image string
	for _, l := range strings.Split(manifest, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "image: "); ok {
			image = v
		}
	}
	for _, c := range []struct{ file, text, want string }{
		{"Makefile", makefile, "IMAGE ?= " + image},
		{"Makefile", makefile, "docker build"},
		{"Dockerfile", dockerfile, "CGO_ENABLED=1 go build"},
		{"Dockerfile", dockerfile, "./cmd/rftpipe"},
		{"Dockerfile", dockerfile, "COPY --from=build /out/rftpipe /usr/local/bin/rftpipe"},
		{"Dockerfile", dockerfile, `ENTRYPOINT ["rftpipe"]`},
	} {
		if image == "" || !strings.Contains(c.text, c.want) {
			t.Errorf("%s does not hold %q (manifest image %q)", c.file, c.want, image)
		}
	}
}
