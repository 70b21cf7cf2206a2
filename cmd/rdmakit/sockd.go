package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/sock/sockd"
)

func newSockdCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sockd",
		Short: "The sock control plane: a per-host daemon for quotas, allow-list, partitions and TCP fallback",
		Long: `sockd is the per-host control plane of sock (net.Conn over remote memory):
listeners register with it, it admits their connections under a policy
(allow-list and per-application quotas), puts each in the least-loaded
partition, and tells dialers on other hosts whether HOST:PORT is an rdmakit
endpoint (otherwise they dial plain TCP). See docs/sockd.md.`,
	}
	cmd.AddCommand(newSockdServeCmd(), newSockdStatusCmd())
	return cmd
}

func newSockdServeCmd() *cobra.Command {
	var unix, listen, policy string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon until SIGINT or SIGTERM (SIGHUP re-reads --policy)",
		Example: `  rdmakit sockd serve
  rdmakit sockd serve --listen 0.0.0.0:7479 --policy /etc/rdmakit/sockd.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSockd(cmd.Context(), cmd.OutOrStdout(), unix, listen, policy)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&unix, "unix", sockd.DefaultUnix, "Unix socket for local processes (a leading @ means the abstract namespace)")
	fl.StringVar(&listen, "listen", sockd.DefaultListen, "TCP address answering other hosts' resolve queries; none disables")
	fl.StringVar(&policy, "policy", "", "policy file (JSON: allow-list and quotas); empty allows everything")
	return cmd
}

func loadPolicy(path string) (*sockd.Policy, error) {
	if path == "" {
		return &sockd.Policy{}, nil
	}
	return sockd.LoadPolicy(path)
}

func runSockd(ctx context.Context, w io.Writer, unix, listen, policyPath string) error {
	p, err := loadPolicy(policyPath)
	if err != nil {
		return err
	}
	srv, err := sockd.Start(ctx, sockd.Config{Unix: unix, Listen: listen, Policy: p})
	if err != nil {
		return err
	}
	defer srv.Close()
	tcp := "none"
	if a := srv.TCPAddr(); a != nil {
		tcp = a.String()
	}
	desc := "allow all, no quotas"
	if policyPath != "" {
		desc = policyPath
	}
	fmt.Fprintf(w, "sockd: serving on unix %s, tcp %s (policy: %s)\n", srv.UnixAddr(), tcp, desc)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(w, "sockd: stopped")
			return nil
		case <-hup:
			if policyPath == "" {
				continue
			}
			p, err := loadPolicy(policyPath)
			if err == nil {
				err = srv.SetPolicy(p)
			}
			if err != nil {
				slog.Error("sockd: policy not reloaded; the old one stays", "file", policyPath, "err", err)
				continue
			}
			fmt.Fprintf(w, "sockd: policy reloaded from %s\n", policyPath)
		}
	}
}

func newSockdStatusCmd() *cobra.Command {
	var unix string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the registered listeners, their connections per partition, and each application's usage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			st, err := (&sockd.Client{Unix: unix}).Status(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printSockdStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVar(&unix, "unix", sockd.DefaultUnix, "the daemon's Unix socket")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func printSockdStatus(w io.Writer, st sockd.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(st.Listeners) == 0 {
		fmt.Fprintln(tw, "no listeners registered")
	} else {
		fmt.Fprintln(tw, "LISTENER\tAPP\tPID\tPARTITIONS\tRING\tMTU\tCONNS PER PARTITION\tBY APP\tADMITTED\tREFUSED")
		for _, l := range st.Listeners {
			conns := make([]string, len(l.Conns))
			for i, n := range l.Conns {
				conns[i] = fmt.Sprint(n)
			}
			var byApp []string
			for app, n := range l.ByApp {
				byApp = append(byApp, fmt.Sprintf("%s=%d", app, n))
			}
			sort.Strings(byApp)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", l.URI, l.App, l.PID, l.Partitions,
				formatBytes(int64(l.RingSize)), formatBytes(int64(l.MTU)), strings.Join(conns, " "), orDash(strings.Join(byApp, " ")), l.Admitted, l.Refused)
		}
	}
	fmt.Fprintln(tw)
	if len(st.Apps) > 0 {
		fmt.Fprintln(tw, "APP\tCONNS\tLISTENERS\tWINDOW\tREFUSED (QUOTA)")
		for _, a := range st.Apps {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\n", a.App, a.Conns, a.Listeners, formatBytes(a.WindowBytes), a.Refused)
		}
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
