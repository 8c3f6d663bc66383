package localstack

// Logs return the tail of what each server's current process wrote to
// stdout and stderr (the last 256 KiB, see LogBuffer), for error reports and
// for copying into log files (make fleet writes them under its log
// directory). Nginx.Logs is beside Nginx.

// Logs is the Postgres server's output.
func (pg *Postgres) Logs() string { return logsOf(pg.process()) }

// Logs is the Redis server's output.
func (r *Redis) Logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return logsOf(r.proc)
}

// Logs is etcd's output.
func (e *Etcd) Logs() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return logsOf(e.proc)
}

// Logs is ZooKeeper's output.
func (z *ZooKeeper) Logs() string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return logsOf(z.proc)
}

// Logs is the Sentinel's output.
func (s *Sentinel) Logs() string { return logsOf(s.proc) }

func logsOf(p *Process) string {
	if p == nil {
		return ""
	}
	return p.Logs()
}
