package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/node"
	"github.com/rdmakit/rdmakit/objstore/object"
)

func newObjstoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "objstore",
		Short: "Plasma-style object store: serve a store, put, get, list, delete and fetch objects",
		Long: `objstore runs an in-memory object store (Plasma's API: create, seal, get, release,
delete) whose local clients share its memory, and which fetches objects it lacks from
the peer stores it is given — small ones by SEND/RECV, large ones by an RDMA READ.

See docs/objstore.md.`,
	}
	cmd.AddCommand(newObjstoreServeCmd(), newObjstorePutCmd(), newObjstoreGetCmd(),
		newObjstoreLsCmd(), newObjstoreRmCmd(), newObjstoreFetchCmd(), newObjstoreTuneCmd())
	return cmd
}

func newObjstoreServeCmd() *cobra.Command {
	var mem, maxObj, threshold, socket, listen, device, tcpListen, peers, protocol, stats, register, keep string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a store: local clients on --socket, peers on --listen / --tcp-listen",
		Long: `serve runs one object store until SIGINT or SIGTERM. It prints one line saying
where it listens (the ports it got for port 0), which the benchmarks parse:

  objstore: serving socket=@objs verbs=127.0.0.1:40613 tcp=127.0.0.1:40614 stats=127.0.0.1:40615

Local clients connect to --socket (a path, or @NAME in Linux's abstract namespace).
Other stores fetch this store's objects from --listen (the connection manager of
the verbs device --device: SEND/RECV and READ) or --tcp-listen (the TCP baselines). This store's own fetches ask the
stores at --peers, in order, with --protocol. /stats on --stats serves the store's
and the transfer layer's counters as JSON.

--register says how READs reach objects: "object" registers each object in place
for its transfer (an rkey reaches that one object); "arena" allocates the store's
memory as one region of --device and READs through it with no registration per
transfer, at the price that every connected peer store can READ any object of
this store. The default is object where the device can register memory in place
(tcp://, loop://) and arena where it cannot (shm://: stores on one host, a READ
done by the fetcher's CPU from the holder's memory).`,
		Example: `  rdmakit objstore serve --mem 1GiB --socket @a --listen 127.0.0.1:7600
  rdmakit objstore serve --mem 1GiB --socket @b --peers 127.0.0.1:7600 --protocol hybrid
  rdmakit objstore serve --mem 1GiB --socket @c --listen 127.0.0.1:7601 --device shm://c`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := node.Config{Socket: socket, Stats: stats,
				Transfer: node.Transfer{Listen: listen, Device: device, TCPListen: tcpListen, Protocol: protocol, Register: register}}
			var err error
			if cfg.Mem, err = parseBytes(mem); err != nil {
				return fmt.Errorf("--mem: %w", err)
			}
			if maxObj != "" {
				if cfg.MaxObjectSize, err = parseBytes(maxObj); err != nil {
					return fmt.Errorf("--max-object: %w", err)
				}
			}
			if keep != "" {
				if cfg.KeepResident, err = parseBytes(keep); err != nil {
					return fmt.Errorf("--keep-resident: %w", err)
				}
			}
			if threshold != "" {
				t, err := parseBytes(threshold)
				if err != nil {
					return fmt.Errorf("--threshold: %w", err)
				}
				cfg.Transfer.Threshold = int(t)
			}
			if peers != "" {
				cfg.Transfer.Peers = strings.Split(peers, ",")
			}
			return node.Serve(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&mem, "mem", "1GiB", "the store's memory")
	fl.StringVar(&maxObj, "max-object", "", "largest object (data and metadata); default --mem")
	fl.StringVar(&socket, "socket", "", "Unix socket local clients connect to: a path or @NAME (default: a fresh @name)")
	fl.StringVar(&listen, "listen", "", "HOST:PORT of the verbs device peers fetch from (SEND/RECV, READ); empty: none")
	fl.StringVar(&device, "device", node.DefaultDevice, "verbs device the pairs between stores run over")
	fl.StringVar(&tcpListen, "tcp-listen", "", "HOST:PORT peers fetch from over plain TCP (tcp4k, tcpbulk); empty: none")
	fl.StringVar(&peers, "peers", "", "comma-separated addresses of the stores this store fetches from")
	fl.StringVar(&protocol, "protocol", "hybrid", "how this store fetches: hybrid, sendrecv, read, tcp4k or tcpbulk")
	fl.StringVar(&threshold, "threshold", "", "hybrid's switch from SEND/RECV to READ (default: the transfer layer's)")
	fl.StringVar(&stats, "stats", "", "HOST:PORT serving /stats as JSON; empty: none")
	fl.StringVar(&register, "register", "", "how READs reach objects: object (registered per transfer) or arena (the store's memory as one region); default: by --device")
	fl.StringVar(&keep, "keep-resident", "", "freed memory the store keeps resident instead of giving it back (default: the store's)")
	return cmd
}

// objClientFlags are the flags every client command has.
type objClientFlags struct {
	socket  string
	timeout time.Duration
}

func (f *objClientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.socket, "socket", "", "the store's Unix socket: a path or @NAME (required)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 10*time.Second, "how long the command may take")
}

// run connects to the store and calls do with the client and a context
// bounded by --timeout; the client is closed when do returns.
func (f *objClientFlags) run(cmd *cobra.Command, do func(ctx context.Context, c *objstore.Client) error) error {
	if f.socket == "" {
		return errors.New("--socket: required")
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	c, err := objstore.Connect(ctx, f.socket)
	if err != nil {
		return err
	}
	defer c.Close()
	return do(ctx, c)
}

// parseIDs parses object IDs given as arguments.
func parseIDs(args []string) ([]object.ID, error) {
	ids := make([]object.ID, len(args))
	for i, a := range args {
		id, err := object.ParseID(a)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

func newObjstorePutCmd() *cobra.Command {
	var f objClientFlags
	var idFlag, meta string
	cmd := &cobra.Command{
		Use:   "put [FILE]",
		Short: "Create and seal an object holding FILE's bytes (stdin without FILE); prints its ID",
		Example: `  rdmakit objstore put --socket @a photo.jpg
  echo hello | rdmakit objstore put --socket @a --id 00112233445566778899aabbccddeeff00112233`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if len(args) == 1 {
				file, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer file.Close()
				in = file
			}
			data, err := io.ReadAll(in)
			if err != nil {
				return err
			}
			id := object.NewID()
			if idFlag != "" {
				if id, err = object.ParseID(idFlag); err != nil {
					return fmt.Errorf("--id: %w", err)
				}
			}
			return f.run(cmd, func(ctx context.Context, c *objstore.Client) error {
				dst, err := c.Create(ctx, id, len(data), []byte(meta))
				if err != nil {
					return err
				}
				copy(dst, data)
				if err := c.Seal(ctx, id); err != nil {
					return errors.Join(err, c.Abort(ctx, id))
				}
				if err := c.Release(ctx, id); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
				return nil
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&idFlag, "id", "", "the object's ID, 40 hex digits (default: random)")
	cmd.Flags().StringVar(&meta, "metadata", "", "the object's metadata")
	return cmd
}

func newObjstoreGetCmd() *cobra.Command {
	var f objClientFlags
	var out string
	var fetch bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:     "get ID",
		Short:   "Write a sealed object's data to stdout (or --out), fetching it from peers with --fetch",
		Example: `  rdmakit objstore get --socket @b --fetch 00112233445566778899aabbccddeeff00112233 > copy.jpg`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *objstore.Client) error {
				if fetch {
					errs, err := c.Fetch(ctx, ids)
					if err != nil {
						return err
					}
					if err := errors.Join(errs...); err != nil {
						return err
					}
				}
				bufs, err := c.Get(ctx, ids, wait)
				if err != nil {
					return err
				}
				if bufs[0] == nil {
					return fmt.Errorf("objstore: get %s: %w", ids[0], object.ErrNotFound)
				}
				defer c.Release(ctx, ids[0])
				w := cmd.OutOrStdout()
				if out != "" {
					file, err := os.Create(out)
					if err != nil {
						return err
					}
					defer file.Close()
					w = file
				}
				_, err = w.Write(bufs[0].Data)
				return err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&out, "out", "", "file to write the data to (default stdout)")
	cmd.Flags().BoolVar(&fetch, "fetch", false, "fetch the object from the store's peers first if it is not local")
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to wait for the object to be sealed")
	return cmd
}

func newObjstoreLsCmd() *cobra.Command {
	var f objClientFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the store's objects: ID, data and metadata size, sealed, references",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, func(ctx context.Context, c *objstore.Client) error {
				infos, err := c.List(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tDATA\tMETADATA\tSEALED\tREFS")
				for _, o := range infos {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%t\t%d\n", o.ID, o.DataSize, o.MetadataSize, o.Sealed, o.RefCount)
				}
				return tw.Flush()
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newObjstoreRmCmd() *cobra.Command {
	var f objClientFlags
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete sealed objects no client references",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *objstore.Client) error {
				return c.Delete(ctx, ids...)
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newObjstoreFetchCmd() *cobra.Command {
	var f objClientFlags
	cmd := &cobra.Command{
		Use:   "fetch ID...",
		Short: "Make objects present in the store, pulling those it lacks from its peers",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *objstore.Client) error {
				errs, err := c.Fetch(ctx, ids)
				if err != nil {
					return err
				}
				return errors.Join(errs...)
			})
		},
	}
	f.add(cmd)
	return cmd
}
