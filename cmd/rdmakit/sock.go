package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/bench/sockexp"
)

func newSockCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sock",
		Short: "Sockets over remote memory (NT.Sockets): serve echo, sink or HTTP apps over sock or Go's net",
		Long: `sock serves the apps the sock experiments measure (rdmakit bench run sock-latency,
sock-throughput, sock-http, sock-isolation) on a listener named by a URI:

  tcp://HOST:PORT     rdmakit's sock over the tcp verbs transport
  shm://NAME          rdmakit's sock over shared memory
  net+tcp://HOST:PORT Go's net package over TCP (a baseline)
  net+unix:///PATH    Go's net package over a Unix domain socket
  net+unix://@NAME    the same in Linux's abstract namespace

See docs/cli.md.`,
	}
	cmd.AddCommand(newSockServeCmd())
	return cmd
}

func newSockServeCmd() *cobra.Command {
	var listen, app string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Accept connections on --listen and run an echo, sink, HTTP hello-world or mux app on them",
		Long: `serve listens on --listen, prints one line saying where it listens (with the
port it got for port 0):

  sockexp: listening on net+tcp://127.0.0.1:40613 (app echo)

and runs --app on every connection it accepts until SIGINT or SIGTERM:

  echo  writes every byte it reads back
  sink  reads batches and discards them, acknowledging each with one byte
        (a batch: its length L, the 8 bytes included, big-endian, then L-8 bytes)
  http  net/http's server (http.Serve on the listener) answering every
        request with "hello, world\n"
  mux   the first byte of each connection picks echo ('e') or sink ('s')`,
		Example: `  rdmakit sock serve --listen net+tcp://127.0.0.1:0 --app echo
  rdmakit sock serve --listen net+unix://@echo --app echo
  rdmakit sock serve --listen shm://bench --app http`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := sockexp.ParseApp(app)
			if err != nil {
				return fmt.Errorf("--app: %w", err)
			}
			if listen == "" {
				return fmt.Errorf("--listen: want a URI (%s)", strings.Join(sockexp.Schemes(), ", "))
			}
			return sockexp.ServeURI(cmd.Context(), cmd.OutOrStdout(), listen, a)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "", "URI to listen on: tcp://HOST:PORT, shm://NAME, net+tcp://HOST:PORT, net+unix:///PATH or net+unix://@NAME")
	fl.StringVar(&app, "app", string(sockexp.Echo), "what to do with connections: echo, sink, http or mux")
	return cmd
}
