package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/version/verflag"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// etcdReadyTimeout bounds how long the API server waits for its embedded etcd.
// A fresh single-member etcd elects itself within its election timeout;
// minutes would mean a broken data directory or disk.
const etcdReadyTimeout = time.Minute

// The embedded etcd's raft clock. etcd's defaults (a 100 ms heartbeat, a
// 1000 ms election timeout) are sized for the round trips between members;
// this etcd has no peer. At start it advances its clock to one tick before
// the election timeout, and raft randomises that timeout between 1 and 2 times
// the configured one, so a fresh member waits 1 to 10 ticks before it elects
// itself. Measured on 2 cores, from StartEtcd to ReadyNotify: 0.1-1.0 s with
// the defaults, 14-93 ms with a 10 ms tick. etcd's ratio of 10 heartbeats to
// an election timeout is kept.
const (
	etcdTickMs     = 10
	etcdElectionMs = 10 * etcdTickMs
)

// runAPIServer runs upstream's kube-apiserver command. With
// --embedded-etcd-data-dir it first starts etcd in this process, listening on a
// Unix socket (nothing on the network), points --etcd-servers at it, and stops it
// once the API server has returned. Upstream's flag parsing, --help and --version
// come first, so neither starts etcd.
func runAPIServer([]string) int {
	cmd := apiserver.NewAPIServerCommand()
	ours := pflag.NewFlagSet("embedded etcd", pflag.ContinueOnError)
	dataDir := ours.String("embedded-etcd-data-dir", "", "start etcd inside this process with its data in this directory (svclab-kube); --etcd-servers then points to it")
	socket := ours.String("embedded-etcd-socket", "", "the embedded etcd's client Unix socket (default: etcd.sock in --embedded-etcd-data-dir)")
	cmd.Flags().AddFlagSet(ours)

	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		help(c, args)
		fmt.Fprintf(c.OutOrStdout(), "\nEmbedded etcd flags (svclab-kube):\n\n%s", ours.FlagUsages())
	})

	upstream := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// Upstream's RunE does this first too; doing it here keeps --version from
		// starting etcd.
		verflag.PrintAndExitIfRequested()
		if *dataDir == "" {
			return upstream(c, args)
		}
		if c.Flags().Changed("etcd-servers") {
			return errors.New("--etcd-servers and --embedded-etcd-data-dir exclude each other")
		}
		sock := *socket
		if sock == "" {
			sock = filepath.Join(*dataDir, "etcd.sock")
		}
		etcd, err := startEtcd(c.Context(), *dataDir, sock)
		if err != nil {
			return err
		}
		defer etcd.Close()
		if err := c.Flags().Set("etcd-servers", "unix://"+sock); err != nil {
			return err
		}
		return upstream(c, args)
	}
	return cli.Run(cmd)
}

// startEtcd starts a single-member etcd whose only listener is the client Unix
// socket at sock, and waits until it serves.
func startEtcd(ctx context.Context, dataDir, sock string) (*embed.Etcd, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	abs, err := filepath.Abs(sock)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: socket %s: %w", sock, err)
	}
	// sockaddr_un holds 108 bytes with the terminating NUL.
	if len(abs) > 107 {
		return nil, fmt.Errorf("embedded etcd: socket path %s is %d bytes, a Unix socket path holds at most 107: use --embedded-etcd-socket with a shorter one", abs, len(abs))
	}
	// A socket left by a killed run would make the listen fail.
	if err := os.Remove(abs); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = dataDir
	client := url.URL{Scheme: "unix", Path: abs}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	// A single member never talks to peers: no peer listener at all (its
	// advertised peer URL, etcd's default, is only a name in the member list).
	cfg.ListenPeerUrls = nil
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs, cfg.ElectionMs = etcdTickMs, etcdElectionMs
	// etcd's info log repeats what the API server's log says better, and its
	// warnings are mostly "apply request took too long" on a busy machine.
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd in %s: %w", dataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", dataDir, err)
	case <-time.After(etcdReadyTimeout):
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: not ready after %s", dataDir, etcdReadyTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", dataDir, ctx.Err())
	}
}
