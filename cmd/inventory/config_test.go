package main

import (
	"bytes"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

// TestRedactDSN: every form of connection string loses its passwords and
// keeps the rest as written.
func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		// URL userinfo, one host and several.
		{"postgres://app:hunter2@db:5432/inventory?sslmode=disable", "postgres://app:xxxxx@db:5432/inventory?sslmode=disable"},
		{"postgres://app:hunter2@h1:5432,h2:5432/inventory?target_session_attrs=read-write",
			"postgres://app:xxxxx@h1:5432,h2:5432/inventory?target_session_attrs=read-write"},
		{"postgresql://app:hun%40ter2@db/inventory", "postgresql://app:xxxxx@db/inventory"},
		{"postgres://app:hun/ter@2@db/inventory", "postgres://app:xxxxx@db/inventory"},
		{"postgres://app@db/inventory", "postgres://app@db/inventory"},
		// A password in the query.
		{"postgres://app@db/inventory?sslmode=disable&password=hunter2", "postgres://app@db/inventory?sslmode=disable&password=xxxxx"},
		{"postgres://db/inventory?Password=hunter2&sslpassword=keypass2#x", "postgres://db/inventory?Password=xxxxx&sslpassword=xxxxx#x"},
		{"postgres://db/inventory?pass%77ord=hunter2", "postgres://db/inventory?pass%77ord=xxxxx"},
		// Keyword/value: unquoted, quoted with spaces and escapes, spaces around "=".
		{"host=db user=app password=hunter2 dbname=inventory", "host=db user=app password=xxxxx dbname=inventory"},
		{"host=db password='hunter 2 has spaces' dbname=inventory", "host=db password='xxxxx' dbname=inventory"},
		{`password='it\'s hunter2' host=db`, `password='xxxxx' host=db`},
		{`host=db password = hun\ ter2 dbname=inventory`, "host=db password = xxxxx dbname=inventory"},
		{"host=db\tpassword=hunter2\nsslpassword='keypass2'", "host=db\tpassword=xxxxx\nsslpassword='xxxxx'"},
		{"host=db password='hunter2 unterminated", "host=db password='xxxxx"},
		// Redis: userinfo with and without a user, a ?password=, TLS.
		{"redis://:hunter2@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"redis://app:hunter2@127.0.0.1:6379/0", "redis://app:xxxxx@127.0.0.1:6379/0"},
		{"rediss://127.0.0.1:6379/0?password=hunter2&protocol=3", "rediss://127.0.0.1:6379/0?password=xxxxx&protocol=3"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
	} {
		if got := redactDSN(tc.dsn); got != tc.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}

// secrets are the passwords TestSecretsStayOutOfTheLog hides, written
// and decoded.
var secrets = []string{"hunter2", "hunter 2", "keypass2", "s3cr3t", "hun@ter"}

func leaked(s string) string {
	for _, secret := range secrets {
		if strings.Contains(s, secret) {
			return secret
		}
	}
	return ""
}

// TestSecretsStayOutOfTheLog: the start line (config's LogValue) and the
// errors of a bad configuration never show a password of a Postgres URL,
// Redis URL or the redlock list, in any form.
func TestSecretsStayOutOfTheLog(t *testing.T) {
	good := []map[string]string{
		{"INVENTORY_POSTGRES_URL": "host=127.0.0.1 user=app password='hunter 2' dbname=inventory sslmode=disable",
			"INVENTORY_REDIS_URL": "redis://:hunter2@127.0.0.1:6379/0"},
		{"INVENTORY_POSTGRES_URL": "postgres://app@127.0.0.1:5432/inventory?password=hunter2&sslpassword=keypass2",
			"INVENTORY_REDLOCK_URLS": "redis://:s3cr3t@127.0.0.1:7001,redis://app:hun%40ter@127.0.0.1:7002,redis://:hunter2@127.0.0.1:7003"},
		{"INVENTORY_POSTGRES_URL": "postgres://app:hunter2@h1:5432,h2:5432/inventory?target_session_attrs=read-write"},
	}
	for _, env := range good {
		env["INVENTORY_INSTANCE"] = "x"
		cfg, err := loadConfig(envFrom(env))
		if err != nil {
			t.Fatalf("loadConfig(%v) = %v", env, err)
		}
		var line bytes.Buffer
		slog.New(slog.NewJSONHandler(&line, nil)).Info("serving", "config", cfg)
		if s := leaked(line.String()); s != "" || !strings.Contains(line.String(), redactedValue) {
			t.Errorf("the start line with %v shows %q, want every password as %s:\n%s", env, s, redactedValue, line.String())
		}
	}

	bad := []map[string]string{
		{"INVENTORY_POSTGRES_URL": "host=127.0.0.1 password=hunter2 port=notaport"},
		{"INVENTORY_POSTGRES_URL": "host=127.0.0.1 password = 'hunter 2' port=notaport"},
		{"INVENTORY_POSTGRES_URL": "host=127.0.0.1 password='hunter2"},
		{"INVENTORY_POSTGRES_URL": "postgres://app@127.0.0.1:notaport/inventory?password=hunter2"},
		{"INVENTORY_POSTGRES_URL": "postgres://app:hunter2@[::1/inventory"},
		{"INVENTORY_POSTGRES_URL": "postgres://app@127.0.0.1/inventory?password=hunter2&pool_max_conns=many"},
		{"INVENTORY_REDIS_URL": "redis://:hunter2@127.0.0.1:notaport/0"},
		{"INVENTORY_REDIS_URL": "redis://127.0.0.1:6379/0?password=hunter2"},
		{"INVENTORY_REDIS_URL": "redis://:hunter2@127.0.0.1:6379/notadb"},
		{"INVENTORY_REDLOCK_URLS": "redis://:s3cr3t@127.0.0.1:7001,redis://:s3cr3t@127.0.0.1:7002,redis://:s3cr3t@127.0.0.1:bad"},
		{"INVENTORY_REDLOCK_URLS": "redis://127.0.0.1:7001?password=hunter2,redis://127.0.0.1:7002,redis://127.0.0.1:7003?password=hunter2&db=x"},
	}
	for _, env := range bad {
		env["INVENTORY_INSTANCE"] = "x"
		_, err := loadConfig(envFrom(env))
		if err == nil {
			t.Errorf("loadConfig(%v) = nil, want a configuration error", env)
			continue
		}
		if s := leaked(err.Error()); s != "" {
			t.Errorf("loadConfig(%v) = %v: shows %q", env, err, s)
		}
	}
}

// TestRedactErr: the secret goes, as written and decoded, and nothing else.
func TestRedactErr(t *testing.T) {
	raw := "postgres://app:hun%40ter@db:bad/inventory"
	err := errors.New(`parse "postgres://app:hun%40ter@db:bad/inventory": invalid port ":bad" (password hun@ter)`)
	want := `parse "postgres://app:xxxxx@db:bad/inventory": invalid port ":bad" (password xxxxx)`
	if got := redactErr(err, raw); got != want {
		t.Errorf("redactErr(%q) = %q, want %q", err, got, want)
	}
}

// TestReadBudgetIsOnByDefault: unset, INVENTORY_READ_RATE is readsPerCPU
// for each CPU the replica may use; 0 turns it off; a number is taken.
func TestReadBudgetIsOnByDefault(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  float64
	}{
		{"", float64(readsPerCPU * runtime.GOMAXPROCS(0))},
		{"0", 0},
		{"25.5", 25.5},
	} {
		cfg, err := loadConfig(envFrom(map[string]string{"INVENTORY_INSTANCE": "x", "INVENTORY_READ_RATE": tc.value}))
		if err != nil || cfg.ReadRate != tc.want {
			t.Errorf("loadConfig with INVENTORY_READ_RATE=%q: ReadRate = %v, %v; want %v", tc.value, cfg.ReadRate, err, tc.want)
		}
	}
}
