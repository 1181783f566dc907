package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/metrics"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// waitReloading waits as daemon.Wait does, reloading the configuration
// each time o.reload fires (SIGHUP). Reloads run on this goroutine, so
// never at the same time as the shutdown that follows.
func waitReloading(ctx context.Context, d *daemon.Daemon, o runOptions, reloads *metrics.Reloads) error {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Wait(waitCtx) }()
	for {
		select {
		case err := <-done:
			return err
		case <-o.reload:
			reloadConfig(ctx, d, o, reloads)
		}
	}
}

// reloadConfig rereads the configuration file the daemon runs and
// applies it; on any error the running configuration stays, and the
// error is logged with the lines it names.
func reloadConfig(ctx context.Context, d *daemon.Daemon, o runOptions, reloads *metrics.Reloads) {
	log := o.log
	path := cmp.Or(o.configPath, "(embedded default)")
	log.Info("SIGHUP: reloading the configuration", "config", path)
	cfg, hash, err := loadConfigHash(o.configPath, false)
	var plan *daemon.Plan
	if err == nil {
		plan, err = daemon.NewPlan(cfg)
	}
	var st daemon.ReloadStats
	if err == nil {
		st, err = d.Reload(ctx, plan)
	}
	if err != nil {
		reloads.Failed()
		if plan != nil && !errors.Is(err, daemon.ErrReloadRefused) {
			log.Error("reload partly applied", "config", path, "err", err)
			return
		}
		log.Error("reload refused", "config", path, "err", err)
		return
	}
	reloads.Loaded(hash)
	log.Info("configuration reloaded", "config", path, "sha256", hash, "kept", st.Kept, "added", st.Added,
		"removed", st.Removed, "rebuilt", st.Rebuilt, "dropped_while_rebuilt", st.Closed, "freed", st.Freed, "took", st.Took)
}

func cmdReload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("reload")
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the configuration file the daemon runs (required): checked first, then the daemon rereads it")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the daemon's result on its metrics endpoint (0: do not wait)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *path == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: cephdpdkd reload --config FILE [--wait DURATION]")
		return errUsage
	}
	// What the daemon would refuse for the file itself, it is told here,
	// with the lines, before anything is signalled.
	cfg, err := loadConfig(*path, false)
	if err != nil {
		return err
	}
	if _, err := daemon.NewPlan(cfg); err != nil {
		return fmt.Errorf("config %s: %w", *path, err)
	}
	pid, ok := pmd.PrimaryPID(cfg.EAL.FilePrefix)
	if !ok {
		return fmt.Errorf("no cephdpdkd runs with EAL file prefix %q (its lock on %s/config is not held): start it, or check eal.file_prefix",
			cfg.EAL.FilePrefix, pmd.RuntimeDir(cfg.EAL.FilePrefix))
	}
	var url string
	okBefore, failedBefore, watch := 0.0, 0.0, false
	if *wait > 0 && cfg.Metrics.Listen != config.MetricsOff {
		url = metricsURL(cfg.Metrics.Listen)
		if ok, failed, err := scrapeReloads(ctx, url); err == nil {
			okBefore, failedBefore, watch = ok, failed, true
		}
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("signal pid %d: %w", pid, err)
	}
	if !watch {
		fmt.Fprintf(stdout, "sent SIGHUP to pid %d; its log says how the reload went\n", pid)
		return nil
	}
	deadline := time.Now().Add(*wait)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		ok, failed, err := scrapeReloads(ctx, url)
		switch {
		case err != nil:
		case failed > failedBefore:
			return fmt.Errorf("pid %d refused the reload and still runs its previous configuration: its log has the reason", pid)
		case ok > okBefore:
			fmt.Fprintf(stdout, "pid %d reloaded %s\n", pid, *path)
			return nil
		}
	}
	return fmt.Errorf("sent SIGHUP to pid %d, but it reported no reload within %v: see its log", pid, *wait)
}

// metricsURL is where this host reaches a metrics listener.
func metricsURL(listen string) string {
	host, port, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/metrics"
}

// scrapeReloads reads cephdpdkd_config_reloads_total by result.
func scrapeReloads(ctx context.Context, url string) (ok, failed float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	found := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for label, v := range map[string]*float64{`{result="ok"} `: &ok, `{result="error"} `: &failed} {
			if rest, cut := strings.CutPrefix(line, "cephdpdkd_config_reloads_total"+label); cut {
				if *v, err = strconv.ParseFloat(rest, 64); err != nil {
					return 0, 0, err
				}
				found = true
			}
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("%s: no cephdpdkd_config_reloads_total", url)
	}
	return ok, failed, sc.Err()
}
