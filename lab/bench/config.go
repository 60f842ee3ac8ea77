package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/svclab/svclab/lab/proxy"
)

// Config says what to measure. DefaultConfig and QuickConfig fill it; the CLI
// overrides fields from flags.
type Config struct {
	// Name is the lab's topology name; namespaces are svclab-NAME-...
	Name string
	// Services (N) and Endpoints (E) per Service, every pair measured.
	Services  []int
	Endpoints []int
	// Modes are registered proxy modes that have a proxier of their own.
	Modes []string
	// Methods are the ways of writing measured (proxy.Mode.Methods), of
	// whichever mode has them; a mode none of whose methods is listed is
	// measured with its default one, its first.
	Methods []string
	// KubeProxyModes are the modes the real kube-proxy is measured in, beside
	// svclab's proxiers (rows of method KubeProxyMethod), in the variants of
	// Backends its mode has (else its first); empty: kube-proxy is not run.
	KubeProxyModes []string
	// KubeBinary is the component binary kube-proxy and the control plane run
	// from; empty finds it (kube.Binary).
	KubeBinary string
	// Backends are the variants measured (proxy.Variant.Name: iptables' xtables
	// backends), of whichever mode has them; a mode with variants none of
	// which is listed is measured in its first.
	Backends []string
	// Reps is how many times each update is repeated (at least 20 for the
	// percentiles the issue asks for).
	Reps int
	// MinReps and CellBudget bound the slow cells: an update is repeated Reps
	// times unless that would take more than CellBudget, and then as often as
	// the budget allows but at least MinReps times. Zero CellBudget: no bound.
	// The summary names every cell cut short.
	MinReps    int
	CellBudget time.Duration
	// ColdCap bounds the cold sync a lab starts with: a size whose cold sync,
	// extrapolated from the smaller ones, would take longer is not run, and one
	// that runs longer is stopped (the program writing it is killed); either way
	// the curve stops there and a note says so. Zero: no cap.
	ColdCap time.Duration
	// Deadline bounds the whole run: labs, and steps of a lab, not started by
	// then are not run (nor labs predicted to end past it), and notes say
	// which. Zero: no deadline.
	Deadline time.Duration
	// PerRuleCap bounds one sync by a method that writes one rule per program
	// run (proxy.Mode.PerRule), which grows with the square of the table and
	// cannot be stopped part-way: a size, or an update, whose sync is predicted
	// to exceed it is not run, and the summary says where the method was cut.
	PerRuleCap time.Duration
	// OverheadPairs is how many times svclab's cold sync and a bare apply of
	// the same rules by the mode's own program (proxy.BareApplier) alternate.
	OverheadPairs int
	// Connects is how many connections the data path makes to each target.
	Connects int
	// ProbeInterval, AttemptTimeout and ProbeWorkers size the prober (see
	// proberConfig).
	ProbeInterval  time.Duration
	AttemptTimeout time.Duration
	ProbeWorkers   int
	// Grace is how long after a sync returned the changed Service may take to
	// answer before the repetition counts as failed.
	Grace time.Duration
	// Where is "host" or "vm", recorded with the machine.
	Where string
	// Log receives progress lines.
	Log io.Writer
}

// DefaultConfig is the default run for where ("host" or "vm"), sized so that
// both parts together finish within 15 minutes on a 2-core machine: the host
// part has 8 minutes, the VM part 5.5 (the VM's boot, and the step under way
// at a deadline, up to a minute or two in the VM, come on top).
// Whatever does not fit is cut (cheapest and most compared first: see
// runner.groups) and the notes say what.
//
// In the VM (qemu TCG here) a sync costs 10 to 30 times what it costs on the
// host (starting a program alone takes about 100 ms), so it measures E=2 only,
// its cells have a smaller budget and its repetitions are fewer; the prober
// keeps its 1 ms interval, but an attempt may take longer before it counts as
// unanswered, so more are under way at once; and the data path makes fewer
// connections.
func DefaultConfig(where string) Config {
	c := Config{
		Name:       "bench",
		Services:   []int{100, 1000, 5000, 10000},
		Endpoints:  []int{2, 10},
		Modes:      measurableModes(),
		Reps:       20,
		MinReps:    3,
		CellBudget: 6 * time.Second,
		PerRuleCap: 8 * time.Second,
		ColdCap:    40 * time.Second,
		// Eight minutes on the host leaves room for iptables nft at 10000×2 (a
		// cold sync of about 20 s, three minutes for the step) beside the VM
		// part's five and a half within the 15-minute default run.
		Deadline:       480 * time.Second,
		OverheadPairs:  3,
		Connects:       200,
		ProbeInterval:  time.Millisecond,
		AttemptTimeout: 100 * time.Millisecond,
		ProbeWorkers:   160,
		Grace:          5 * time.Second,
		Where:          where,
	}
	c.Methods, c.Backends = allMethods(c.Modes), allVariants(c.Modes)
	if where == WhereVM {
		// In the VM, the modes against each other, each with its default
		// method (kube-proxy's own: for iptables, partial), E=2: the whole grid
		// would take an hour there. The host part has every method and both E.
		c.Endpoints = []int{2}
		c.Methods = defaultMethods(c.Modes)
		c.CellBudget = 5 * time.Second
		c.PerRuleCap = 20 * time.Second
		c.ColdCap = 60 * time.Second
		c.Deadline = 330 * time.Second
		c.AttemptTimeout = 300 * time.Millisecond
		c.ProbeWorkers = 400
		c.Grace = 20 * time.Second
		c.Connects = 100
	}
	return c
}

// QuickConfig is the smoke run, to check the output's shape in about a minute:
// two small sizes, few repetitions; on the host every method and variant, in
// the VM every mode with its default method and first variant only.
func QuickConfig(where string) Config {
	c := DefaultConfig(where)
	c.Services = []int{20, 200}
	c.Endpoints = []int{2}
	c.Reps = 3
	c.MinReps = 2
	c.CellBudget = 3 * time.Second
	c.PerRuleCap = 5 * time.Second
	c.ColdCap = 20 * time.Second
	c.Deadline = 0
	c.OverheadPairs = 2
	c.Connects = 20
	if where == WhereVM {
		c.Methods, c.Backends = defaultMethods(c.Modes), firstVariants(c.Modes)
		c.Reps, c.MinReps = 2, 1
		c.CellBudget = 2 * time.Second
		c.Connects = 10
	}
	return c
}

// Where values.
const (
	WhereHost = "host"
	WhereVM   = "vm"
)

// Validate checks c and fills what is implied.
func (c *Config) Validate() error {
	var errs []error
	if c.Name == "" {
		c.Name = "bench"
	}
	if len(c.Services) == 0 || len(c.Endpoints) == 0 || len(c.Modes)+len(c.KubeProxyModes) == 0 {
		errs = append(errs, errors.New("need at least one service count, endpoint count and mode"))
	}
	for _, m := range c.KubeProxyModes {
		if _, err := proxy.Lookup(m); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy mode: %w", err))
		}
	}
	for _, n := range c.Services {
		if n < 3 || n > 200000 {
			errs = append(errs, fmt.Errorf("services %d: want 3 to 200000 (the first, middle and last Service play parts)", n))
		}
	}
	for _, e := range c.Endpoints {
		if e < 1 || e > MaxEndpoints {
			errs = append(errs, fmt.Errorf("endpoints %d: want 1 to %d", e, MaxEndpoints))
		}
	}
	measured, err := c.Measured()
	if err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, unclaimed("method", c.Methods, measured, func(m proxy.Mode) []string { return m.Methods })...)
		errs = append(errs, unclaimed("backend", c.Backends, measured, proxy.Mode.VariantNames)...)
	}
	if c.Reps < 1 || c.MinReps < 1 || c.OverheadPairs < 1 || c.Connects < 1 {
		errs = append(errs, errors.New("reps, minimum reps, overhead pairs and connects must be at least 1"))
	}
	if c.MinReps > c.Reps {
		c.MinReps = c.Reps
	}
	if c.ColdCap < 0 || c.Deadline < 0 || c.CellBudget < 0 || c.PerRuleCap < 0 {
		errs = append(errs, errors.New("caps, budgets and deadlines cannot be negative"))
	}
	if c.ProbeInterval <= 0 || c.AttemptTimeout <= 0 || c.ProbeWorkers < 1 || c.Grace <= 0 {
		errs = append(errs, errors.New("probe interval, attempt timeout, workers and grace must be positive"))
	}
	if c.Where != WhereHost && c.Where != WhereVM {
		errs = append(errs, fmt.Errorf("where %q: want host or vm", c.Where))
	}
	slices.Sort(c.Services)
	c.Services = slices.Compact(c.Services)
	slices.Sort(c.Endpoints)
	c.Endpoints = slices.Compact(c.Endpoints)
	return errors.Join(errs...)
}

func (c *Config) proberConfig() proberConfig {
	return proberConfig{Interval: c.ProbeInterval, AttemptTimeout: c.AttemptTimeout, Workers: c.ProbeWorkers}
}

func (c *Config) maxEndpoints() int { return slices.Max(c.Endpoints) }
