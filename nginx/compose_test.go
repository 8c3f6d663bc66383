package nginx

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// No Docker engine runs on our machines, so instead of `docker compose up`
// these tests check that docker-compose.yml, the Dockerfile, this
// directory's nginx config and the service's contract agree.

// contractEnv is the configuration contract of design.md (plus
// INVENTORY_MAX_QUANTITY from the service's issue), the lock services' and
// Sentinel's settings included.
var contractEnv = []string{
	"INVENTORY_ADDR", "INVENTORY_INSTANCE", "INVENTORY_POSTGRES_URL", "INVENTORY_REDIS_URL",
	"INVENTORY_STRATEGY", "INVENTORY_ADMIN_TOKEN", "INVENTORY_LOCK_TTL", "INVENTORY_LOCK_WAIT",
	"INVENTORY_WORK_DELAY", "INVENTORY_MIGRATE", "INVENTORY_MAX_QUANTITY",
	"INVENTORY_REDIS_SENTINELS", "INVENTORY_REDIS_MASTER",
	"INVENTORY_REDLOCK_URLS", "INVENTORY_ETCD_ENDPOINTS", "INVENTORY_ZOOKEEPER_SERVERS",
}

// contractEndpoints are the GET endpoints a healthcheck may use (design.md).
var contractEndpoints = []string{"/healthz", "/readyz"}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string                       `yaml:"image"`
	Build       any                          `yaml:"build"`
	Environment map[string]string            `yaml:"environment"`
	Ports       []string                     `yaml:"ports"`
	Volumes     []string                     `yaml:"volumes"`
	Healthcheck *struct{ Test []string }     `yaml:"healthcheck"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Profiles    []string                     `yaml:"profiles"`
	Entrypoint  []string                     `yaml:"entrypoint"`
	Command     []string                     `yaml:"command"`
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal([]byte(readRepoFile(t, "docker-compose.yml")), &c); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatalf("docker-compose.yml has no services")
	}
	return c
}

// replicaServices are the compose services that run the inventory server.
func replicaServices(c composeFile) []string {
	var names []string
	for name, s := range c.Services {
		if _, ok := s.Environment["INVENTORY_INSTANCE"]; ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func TestComposeReplicasAreTheNginxUpstreams(t *testing.T) {
	c := loadCompose(t)
	replicas := replicaServices(c)
	if len(replicas) != 2 {
		t.Fatalf("docker-compose.yml has replicas %q, want inventory-1 and inventory-2", replicas)
	}
	var upstreamHosts []string
	for _, u := range UpstreamServers(Upstreams) {
		host, port, err := net.SplitHostPort(u.Addr)
		if err != nil {
			t.Fatalf("upstreams.conf server %q: %v", u.Addr, err)
		}
		upstreamHosts = append(upstreamHosts, host)
		s, ok := c.Services[host]
		if !ok {
			t.Errorf("upstreams.conf names %q, which is no compose service", host)
			continue
		}
		_, listenPort, err := net.SplitHostPort(s.Environment["INVENTORY_ADDR"])
		if err != nil || listenPort != port {
			t.Errorf("upstreams.conf sends %s to port %s, but service %s has INVENTORY_ADDR %q", host, port, host, s.Environment["INVENTORY_ADDR"])
		}
	}
	sort.Strings(upstreamHosts)
	if !slices.Equal(upstreamHosts, replicas) {
		t.Errorf("nginx upstreams %q, compose replicas %q: want the same services", upstreamHosts, replicas)
	}
	images := map[string]bool{}
	for _, name := range replicas {
		s := c.Services[name]
		if s.Environment["INVENTORY_INSTANCE"] != name {
			t.Errorf("service %s has INVENTORY_INSTANCE %q, want its own name", name, s.Environment["INVENTORY_INSTANCE"])
		}
		images[s.Image] = true
	}
	if len(images) != 1 {
		t.Errorf("replicas use images %v, want one image for all", images)
	}
}

func TestComposeEnvIsWhatTheBinaryReads(t *testing.T) {
	c := loadCompose(t)
	config := readRepoFile(t, "cmd/inventory/config.go")
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`env:"(INVENTORY_[A-Z_]+)"`).FindAllStringSubmatch(config, -1) {
		read[m[1]] = true
	}
	// The lock backends' settings, read through their descriptors
	// (backend.Descriptor.Setting, a const Setting of each backend).
	descriptors, _ := filepath.Glob(filepath.Join("..", "internal", "lock", "*", "descriptor.go"))
	for _, d := range descriptors {
		for _, m := range regexp.MustCompile(`Setting = "(INVENTORY_[A-Z_]+)"`).FindAllStringSubmatch(readRepoFile(t, strings.TrimPrefix(d, "../")), -1) {
			read[m[1]] = true
		}
	}
	for _, name := range contractEnv {
		if !read[name] {
			t.Errorf("cmd/inventory/config.go does not read contract variable %s", name)
		}
	}
	for svc, s := range c.Services {
		for name := range s.Environment {
			if !strings.HasPrefix(name, "INVENTORY_") {
				continue
			}
			if !slices.Contains(contractEnv, name) {
				t.Errorf("service %s sets %s, which is not in the configuration contract", svc, name)
			}
			if !read[name] {
				t.Errorf("service %s sets %s, which cmd/inventory/config.go does not read", svc, name)
			}
		}
	}
	for _, name := range replicaServices(c) {
		env := c.Services[name].Environment
		for _, dep := range []struct{ variable, service string }{{"INVENTORY_POSTGRES_URL", "postgres"}, {"INVENTORY_REDIS_URL", "redis"}} {
			u, err := url.Parse(env[dep.variable])
			if err != nil || u.Hostname() != dep.service {
				t.Errorf("service %s: %s = %q, want host %s", name, dep.variable, env[dep.variable], dep.service)
			}
			if _, ok := c.Services[dep.service]; !ok {
				t.Errorf("service %s: %s points at %s, which is no compose service", name, dep.variable, dep.service)
			}
		}
		pg, _ := url.Parse(env["INVENTORY_POSTGRES_URL"])
		pgEnv := c.Services["postgres"].Environment
		if pass, _ := pg.User.Password(); pass != pgEnv["POSTGRES_PASSWORD"] || pg.User.Username() != pgEnv["POSTGRES_USER"] || pg.Path != "/"+pgEnv["POSTGRES_DB"] {
			t.Errorf("service %s: INVENTORY_POSTGRES_URL user/password/database do not match the postgres service's POSTGRES_* settings", name)
		}
		if env["INVENTORY_ADMIN_TOKEN"] == "" {
			t.Errorf("service %s has no INVENTORY_ADMIN_TOKEN: the demo could not restock", name)
		}
	}
}

func TestComposeHealthchecksAndStartOrder(t *testing.T) {
	c := loadCompose(t)
	routes := readRepoFile(t, "internal/api/routes.go")
	run := readRepoFile(t, "cmd/inventory/run.go")
	if !strings.Contains(run, `"healthcheck"`) {
		t.Errorf("cmd/inventory/run.go has no healthcheck command, which the compose healthchecks run (the image has no curl)")
	}
	urlInTest := regexp.MustCompile(`https?://[^\s"]+`)
	for name, s := range c.Services {
		if s.Profiles != nil {
			continue // tools such as the load tester are not waited on
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
			continue
		}
		test := strings.Join(s.Healthcheck.Test, " ")
		for _, raw := range urlInTest.FindAllString(test, -1) {
			u, err := url.Parse(raw)
			if err != nil {
				t.Errorf("service %s healthcheck URL %q: %v", name, raw, err)
				continue
			}
			if !slices.Contains(contractEndpoints, u.Path) {
				t.Errorf("service %s healthcheck calls %s, want one of %q", name, u.Path, contractEndpoints)
			}
			if !strings.Contains(routes, `"`+u.Path+`"`) {
				t.Errorf("service %s healthcheck calls %s, which internal/api/routes.go does not serve", name, u.Path)
			}
			wantPort := "8080" // every HTTP service here listens on 8080: the replicas by INVENTORY_ADDR, nginx by nginx.conf
			if u.Port() != wantPort {
				t.Errorf("service %s healthcheck calls port %q, want %s", name, u.Port(), wantPort)
			}
		}
		for dep, cond := range s.DependsOn {
			d, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
			case cond["condition"] != "service_healthy":
				t.Errorf("service %s depends on %s with condition %q, want service_healthy", name, dep, cond["condition"])
			case d.Healthcheck == nil:
				t.Errorf("service %s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			}
		}
	}
	for _, name := range replicaServices(c) {
		deps := c.Services[name].DependsOn
		if deps["postgres"] == nil || deps["redis"] == nil {
			t.Errorf("service %s depends on %v, want postgres and redis", name, deps)
		}
	}
}

func TestComposeNginxServesTheSharedConfig(t *testing.T) {
	c := loadCompose(t)
	n, ok := c.Services["nginx"]
	if !ok {
		t.Fatalf("docker-compose.yml has no nginx service")
	}
	port := strings.TrimSuffix(strings.TrimPrefix(ComposeListen, "listen "), ";")
	if !slices.ContainsFunc(n.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) && strings.HasPrefix(p, "8080:") }) {
		t.Errorf("nginx ports %q, want 8080 published to container port %s (nginx.conf %q)", n.Ports, port, ComposeListen)
	}
	for _, want := range []string{"./nginx/nginx.conf:/etc/nginx/nginx.conf", "./nginx/upstreams.conf:/etc/nginx/upstreams.conf"} {
		if !slices.ContainsFunc(n.Volumes, func(v string) bool { return strings.HasPrefix(v, want) }) {
			t.Errorf("nginx volumes %q, want %s (nginx.conf includes upstreams.conf from its own directory)", n.Volumes, want)
		}
	}
	for _, r := range replicaServices(c) {
		if n.DependsOn[r] == nil {
			t.Errorf("nginx does not wait for %s; nginx resolves upstream names at start", r)
		}
	}
}

func TestComposeLoadtestProfileDrivesNginx(t *testing.T) {
	c := loadCompose(t)
	lt, ok := c.Services["loadtest"]
	if !ok {
		t.Fatalf("docker-compose.yml has no loadtest service")
	}
	if !slices.Contains(lt.Profiles, "loadtest") {
		t.Errorf("loadtest profiles = %q, want it under the loadtest profile (not started by a plain up)", lt.Profiles)
	}
	args := strings.Join(append(slices.Clone(lt.Entrypoint), lt.Command...), " ")
	if !strings.Contains(args, "--url http://nginx:8080") {
		t.Errorf("loadtest runs %q, want --url http://nginx:8080", args)
	}
	token := c.Services[replicaServices(c)[0]].Environment["INVENTORY_ADMIN_TOKEN"]
	if !strings.Contains(args, "--admin-token "+token) {
		t.Errorf("loadtest runs %q, want --admin-token %s (the replicas' INVENTORY_ADMIN_TOKEN)", args, token)
	}
	if lt.Image != c.Services[replicaServices(c)[0]].Image {
		t.Errorf("loadtest image %q differs from the replicas' %q, which the Dockerfile builds with the load tester in it", lt.Image, c.Services[replicaServices(c)[0]].Image)
	}
}

func TestDockerfileBuildsStaticBinariesTheComposeFileRuns(t *testing.T) {
	df := readRepoFile(t, "Dockerfile")
	c := loadCompose(t)
	checks := []struct{ want, why string }{
		{"CGO_ENABLED=0", "static binaries"},
		{"./cmd/inventory", "the service"},
		{"./loadtest", "the load tester for the loadtest profile"},
		{"/usr/local/bin/", "the paths compose runs"},
	}
	for _, ck := range checks {
		if !strings.Contains(df, ck.want) {
			t.Errorf("Dockerfile lacks %q (%s)", ck.want, ck.why)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(df, -1)); n < 2 {
		t.Errorf("Dockerfile has %d FROM lines, want a multi-stage build", n)
	}
	for name, s := range c.Services {
		var bin string
		if s.Healthcheck != nil && len(s.Healthcheck.Test) > 1 && strings.HasPrefix(s.Healthcheck.Test[1], "/usr/local/bin/") {
			bin = s.Healthcheck.Test[1]
		}
		if len(s.Entrypoint) > 0 && strings.HasPrefix(s.Entrypoint[0], "/usr/local/bin/") {
			bin = s.Entrypoint[0]
		}
		if bin != "" && !strings.Contains(df, "/out/"+filepath.Base(bin)) {
			t.Errorf("service %s runs %s, which the Dockerfile does not build", name, bin)
		}
	}
}
