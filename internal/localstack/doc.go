// Package localstack starts throw-away Postgres, Redis and nginx processes on
// free loopback ports, each in a directory of its own, for tests, the local
// fleet and the load tester on machines without a Docker engine.
//
// Every process is started with a parent-death signal, so a crashed test
// binary does not leave servers behind, and Stop is safe to call twice.
// Postgres refuses to run as root, so when the caller is root it runs as the
// unprivileged "postgres" account. Missing server binaries are installed with
// apt-get when running as root on Debian or Ubuntu (see Ensure); otherwise the
// error says which command to run.
package localstack
