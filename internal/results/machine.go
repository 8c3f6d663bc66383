package results

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// ThisMachine is what a record says of the machine it was measured on:
// its cores, CPU model and OS as Linux reports them (empty where it does
// not), without the load, which the caller reads before the run.
func ThisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU()}
	if v, ok := field("/proc/cpuinfo", "model name", ":"); ok {
		m.CPU = v
	}
	if v, ok := field("/etc/os-release", "PRETTY_NAME", "="); ok {
		m.OS = strings.Trim(v, `"`)
	}
	return m
}

// LoadAverage is the 1-minute load average (/proc/loadavg); nil when it
// cannot be read.
func LoadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	fs := strings.Fields(string(b))
	if len(fs) == 0 {
		return nil
	}
	v, err := strconv.ParseFloat(fs[0], 64)
	if err != nil {
		return nil
	}
	return []float64{v}
}

// field is the value of the first "key<sep>value" line of a file.
func field(path, key, sep string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
