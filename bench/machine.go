package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
)

// machineMeta fills what Meta says about this machine and build.
func machineMeta(m *Meta) {
	m.CPU = cpuModel()
	m.Cores = runtime.NumCPU()
	m.GOMAXPROCS = runtime.GOMAXPROCS(0)
	m.OS = runtime.GOOS + "/" + runtime.GOARCH
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Go = runtime.Version()
	m.Relock = relockRevision()
	m.Modules = map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			switch d.Path {
			case "github.com/relockgo/relock", "github.com/redis/rueidis", "github.com/go-redsync/redsync/v4",
				"github.com/bsm/redislock", "github.com/redis/go-redis/v9", "gonum.org/v1/plot":
				v := d.Version
				switch {
				case d.Replace != nil && strings.HasPrefix(d.Replace.Path, "."):
					v = "this tree"
				case d.Replace != nil:
					v = d.Replace.Path + " " + d.Replace.Version
				}
				m.Modules[d.Path] = v
			}
		}
	}
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or GOARCH.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// relockRevision returns the git commit of the relock tree this benchmark
// builds against (the parent directory), marked when what it builds — Go
// sources, scripts, module files — has local changes, or "" when git
// cannot tell. A previous run's output (results/) is no local change.
func relockRevision() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	status, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no", "--", "*.go", "*.lua", "go.mod", "go.sum").Output()
	if err == nil && len(strings.TrimSpace(string(status))) > 0 {
		rev += " with local changes"
	}
	return rev
}
