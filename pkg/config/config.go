// Package config parses the configuration every service shares. Each setting is a flag whose
// default comes from an environment variable (12-factor), so both `--database-url` and
// DATABASE_URL work; flags win. A setting that may carry a secret (Env.Secret) reads its variable
// after parsing instead, so that usage output never shows it. Parsing happens once, in the
// service's Run.
package config

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"
)

// Getenv looks up an environment variable; os.Getenv in production, a map in tests.
type Getenv func(string) string

// Env registers flags with environment defaults and collects every malformed value, so a
// misconfigured deployment learns all its mistakes at once.
type Env struct {
	fs     *flag.FlagSet
	getenv Getenv
	errs   []error
	// secrets maps the flags registered by Secret to their variables, read after parsing.
	secrets map[string]secret
}

type secret struct {
	p   *string
	env string
}

// NewEnv binds flag registration to fs and environment lookup to getenv.
func NewEnv(fs *flag.FlagSet, getenv Getenv) *Env { return &Env{fs: fs, getenv: getenv} }

// String registers a string setting.
func (e *Env) String(p *string, name, env, def, usage string) {
	if v := e.getenv(env); v != "" {
		def = v
	}
	e.fs.StringVar(p, name, def, usage+" (env "+env+")")
}

// Secret registers a string setting that may carry a secret, such as DATABASE_URL's password.
// String would make the variable's value the flag's default, and Go's flag package prints
// defaults on -h and on every unknown flag, to stderr: the container's log. So the flag's default
// is empty and Parse reads the variable when the flag is not given (given, even empty, it wins).
func (e *Env) Secret(p *string, name, env, usage string) {
	e.fs.StringVar(p, name, "", usage+" (env "+env+")")
	if e.secrets == nil {
		e.secrets = map[string]secret{}
	}
	e.secrets[name] = secret{p: p, env: env}
}

// Int registers an integer setting.
func (e *Env) Int(p *int, name, env string, def int, usage string) {
	if v := e.getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q: not an integer", env, v))
		} else {
			def = n
		}
	}
	e.fs.IntVar(p, name, def, usage+" (env "+env+")")
}

// Duration registers a duration setting ("30s", "5m").
func (e *Env) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v := e.getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q: not a duration (e.g. 30s, 5m)", env, v))
		} else {
			def = d
		}
	}
	e.fs.DurationVar(p, name, def, usage+" (env "+env+")")
}

// Bool registers a boolean setting.
func (e *Env) Bool(p *bool, name, env string, def bool, usage string) {
	if v := e.getenv(env); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q: not a boolean", env, v))
		} else {
			def = b
		}
	}
	e.fs.BoolVar(p, name, def, usage+" (env "+env+")")
}

// Parse parses args and reports every malformed environment value and flag.
func (e *Env) Parse(args []string) error {
	if err := e.fs.Parse(args); err != nil {
		e.errs = append(e.errs, err)
	}
	given := map[string]bool{}
	e.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, s := range e.secrets {
		if !given[name] {
			*s.p = e.getenv(s.env)
		}
	}
	return errors.Join(e.errs...)
}

// Process is the configuration every process shares, the operator's included: its operational
// endpoints, its logs and its shutdown. Its checks are shared too, so that no process quietly
// runs with a value another refuses (daemon.NewLogger would log at info, or as JSON).
type Process struct {
	MetricsAddr string
	LogLevel    string
	LogFormat   string
	// ShutdownTimeout bounds graceful shutdown after SIGTERM.
	ShutdownTimeout time.Duration
}

// Register adds the process settings to e.
func (p *Process) Register(e *Env) {
	e.String(&p.MetricsAddr, "metrics-addr", "METRICS_ADDR", ":9090", "address serving /healthz, /readyz and /metrics")
	e.String(&p.LogLevel, "log-level", "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	e.String(&p.LogFormat, "log-format", "LOG_FORMAT", "json", "log format: json or text")
	e.Duration(&p.ShutdownTimeout, "shutdown-timeout", "BOARDREADYOPS_SHUTDOWN_TIMEOUT", 25*time.Second,
		"how long graceful shutdown may take after SIGTERM")
}

// Validate checks the process settings.
func (p *Process) Validate() error {
	var errs []error
	if p.MetricsAddr == "" {
		errs = append(errs, errors.New("METRICS_ADDR must not be empty"))
	}
	switch p.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL %q: want debug, info, warn or error", p.LogLevel))
	}
	switch p.LogFormat {
	case "json", "text":
	default:
		errs = append(errs, fmt.Errorf("LOG_FORMAT %q: want json or text", p.LogFormat))
	}
	if p.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("BOARDREADYOPS_SHUTDOWN_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// Common is the configuration every long-running service with a database shares.
type Common struct {
	DatabaseURL string
	DBMaxConns  int
	Process
}

// Register adds the common settings to e.
func (c *Common) Register(e *Env) {
	e.Secret(&c.DatabaseURL, "database-url", "DATABASE_URL", "PostgreSQL connection URL")
	e.Int(&c.DBMaxConns, "db-max-conns", "BOARDREADYOPS_DB_MAX_CONNS", 10, "maximum PostgreSQL connections of this process")
	c.Process.Register(e)
}

// Validate checks the common settings.
func (c *Common) Validate() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("DATABASE_URL (or --database-url) is required"))
	}
	if c.DBMaxConns < 1 || c.DBMaxConns > 1000 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DB_MAX_CONNS %d: want 1 to 1000", c.DBMaxConns))
	}
	return errors.Join(append(errs, c.Process.Validate())...)
}
